package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/metadata"
)

// topicSpec is a topic to create, after request defaults are resolved.
type topicSpec struct {
	name              string
	partitions        int32
	replicationFactor int16
	assignment        [][]int32 // manual replica assignment; nil: placed by the broker
	configs           map[string]string
}

// handleCreateTopics creates topics (or only validates them). Create on the
// Cluster or on the topic is needed (TOPIC_AUTHORIZATION_FAILED); the
// configs are returned (v5+) only with DescribeConfigs on the topic
// (otherwise ConfigErrorCode TOPIC_AUTHORIZATION_FAILED).
func (b *Broker) handleCreateTopics(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	counts := map[string]int{}
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	clusterCreate := b.authz.allowedQuiet(rc, auth.OpCreate, auth.ResourceCluster, auth.ClusterResourceName)
	for _, rt := range req.Topics {
		var st kmsg.CreateTopicsResponseTopic
		switch {
		case counts[rt.Topic] > 1:
			st = createTopicError(rt.Topic, kerr.InvalidRequest.Code, "duplicate topic name in request")
		case !clusterCreate && !b.authz.allowedTopic(rc, auth.OpCreate, rt.Topic):
			st = createTopicError(rt.Topic, kerr.TopicAuthorizationFailed.Code, "not authorized to create the topic")
		default:
			st = b.createOneTopic(ctx, rt, req.ValidateOnly, time.Duration(req.TimeoutMillis)*time.Millisecond)
			if st.ErrorCode == 0 && !b.authz.allowedTopic(rc, auth.OpDescribeConfigs, rt.Topic) {
				st.Configs, st.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func createTopicError(name string, code int16, msg string) kmsg.CreateTopicsResponseTopic {
	st := kmsg.NewCreateTopicsResponseTopic()
	st.Topic, st.ErrorCode, st.ErrorMessage = name, code, kmsg.StringPtr(msg)
	st.NumPartitions, st.ReplicationFactor = -1, -1
	return st
}

// createOneTopic validates and creates one topic, waiting at most timeout
// for its leaders (none when timeout is 0, as Kafka).
func (b *Broker) createOneTopic(ctx context.Context, rt kmsg.CreateTopicsRequestTopic, validateOnly bool, timeout time.Duration) kmsg.CreateTopicsResponseTopic {
	spec, code, msg := topicSpecFromRequest(rt, b.cfg.DefaultPartitions, &b.parts)
	if code != 0 {
		return createTopicError(rt.Topic, code, msg)
	}
	diskless := metadata.DisklessConfigs(spec.configs)
	var replicas [][]int32
	if diskless {
		replicas, code, msg = disklessReplicas(spec, b.objects != nil)
	} else {
		replicas, code, msg = placeReplicas(spec, b.liveBrks.view())
	}
	if code != 0 {
		return createTopicError(rt.Topic, code, msg)
	}
	var id metadata.TopicID
	if !validateOnly {
		t, elected, err := b.createTopic(ctx, metadata.CreateTopicRequest{Name: spec.name, Replicas: replicas, Configs: spec.configs}, timeout)
		if err != nil {
			code, msg := errorCode(err)
			return createTopicError(rt.Topic, code, msg)
		}
		if !elected && timeout > 0 {
			// As Kafka when the timeout passes: the topic exists, and
			// clients see its partitions as LEADER_NOT_AVAILABLE until
			// the controller elects their leaders.
			return createTopicError(rt.Topic, kerr.RequestTimedOut.Code,
				fmt.Sprintf("topic created, but its partitions had no leaders within the request's %v timeout", timeout))
		}
		id = t.ID
	}
	st := kmsg.NewCreateTopicsResponseTopic()
	st.Topic, st.TopicID = spec.name, id
	st.NumPartitions, st.ReplicationFactor = int32(len(replicas)), int16(len(replicas[0]))
	if diskless {
		st.ReplicationFactor = 1 // as Metadata shows it: the advertised leader alone
	}
	for _, e := range topicConfigEntries(spec.configs, b.cfg.topicDefaults()) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.Source, c.ReadOnly, c.IsSensitive = e.name, kmsg.StringPtr(e.value), int8(e.source), e.readOnly, e.sensitive
		st.Configs = append(st.Configs, c)
	}
	return st
}

// topicSpecFromRequest checks name, configs and counts of a request topic.
func topicSpecFromRequest(rt kmsg.CreateTopicsRequestTopic, defaultPartitions int32, topics *partitionManager) (topicSpec, int16, string) {
	spec := topicSpec{name: rt.Topic, partitions: rt.NumPartitions, replicationFactor: rt.ReplicationFactor}
	if err := validateTopicName(rt.Topic); err != nil {
		return spec, kerr.InvalidTopicException.Code, err.Error()
	}
	if code, msg := topics.checkNameFree(rt.Topic); code != 0 {
		return spec, code, msg
	}
	configs, code, msg := configsFromRequest(rt.Configs)
	if code != 0 {
		return spec, code, msg
	}
	spec.configs = configs
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return spec, kerr.InvalidRequest.Code, "both numPartitions or replicationFactor and replicasAssignments were set; both cannot be used at the same time"
		}
		assignment, code, msg := assignmentFromRequest(rt.ReplicaAssignment)
		spec.assignment = assignment
		return spec, code, msg
	}
	if spec.partitions == -1 {
		spec.partitions = defaultPartitions
	}
	if spec.replicationFactor == -1 {
		spec.replicationFactor = 1 // default.replication.factor
	}
	return spec, 0, ""
}

// checkNameFree refuses an existing name or one colliding with an
// existing name once '.' and '_' are identified (Kafka's rule).
func (m *partitionManager) checkNameFree(name string) (int16, string) {
	if _, ok := m.topic(name); ok {
		return kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic %q already exists", name)
	}
	key := collisionKey(name)
	for _, t := range m.allTopics() {
		if collisionKey(t.topic.Name) == key {
			return kerr.InvalidTopicException.Code, fmt.Sprintf("topic %q collides with existing topic %q", name, t.topic.Name)
		}
	}
	return 0, ""
}

// configsFromRequest turns request configs into a validated override map.
func configsFromRequest(cfgs []kmsg.CreateTopicsRequestTopicConfig) (map[string]string, int16, string) {
	out := make(map[string]string, len(cfgs))
	for _, c := range cfgs {
		if c.Value == nil {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("null value for config %q is not supported", c.Name)
		}
		if _, dup := out[c.Name]; dup {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("config %q given twice", c.Name)
		}
		if metadata.IgnoredTopicConfig(c.Name) {
			continue
		}
		out[c.Name] = *c.Value
	}
	if err := metadata.ValidateTopicConfigs(out); err != nil {
		return nil, kerr.InvalidConfig.Code, err.Error()
	}
	return out, 0, ""
}

// assignmentFromRequest checks that partitions are 0..n-1, each once.
func assignmentFromRequest(ra []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, int16, string) {
	if len(ra) > maxPartitions {
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("more than %d partitions", maxPartitions)
	}
	out := make([][]int32, len(ra))
	for _, a := range ra {
		if a.Partition < 0 || int(a.Partition) >= len(ra) || out[a.Partition] != nil {
			return nil, kerr.InvalidReplicaAssignment.Code, "partitions must be numbered 0..n-1, each given once"
		}
		out[a.Partition] = nonNil(a.Replicas)
	}
	return out, 0, ""
}

// placeReplicas checks a manual assignment against the live brokers, or
// places replicas with controller.PlaceTopic (rack-aware, leaders spread).
func placeReplicas(spec topicSpec, view brokerView) ([][]int32, int16, string) {
	replicas, err := spec.assignment, error(nil)
	if spec.assignment != nil {
		err = controller.CheckAssignment(spec.assignment, len(spec.assignment[0]), view.live)
	} else {
		replicas, err = controller.PlaceTopic(view.list, int(spec.partitions), int(spec.replicationFactor), maxPartitions)
	}
	if err != nil {
		code, msg := errorCode(err)
		return nil, code, msg
	}
	return replicas, 0, ""
}

// createTopic writes the topic to metadata, applies it locally and waits
// (at most wait) until every partition has a leader, so that the topic is
// usable when CreateTopics answers. It reports whether leaders were elected.
func (b *Broker) createTopic(ctx context.Context, req metadata.CreateTopicRequest, wait time.Duration) (metadata.Topic, bool, error) {
	t, err := b.writeTopic(ctx, req)
	if err != nil {
		return t, false, err
	}
	return t, b.parts.awaitLeaders(ctx, t.ID, 0, wait, &b.liveBrks, b.log), nil
}

// writeTopic writes the topic to metadata and applies it locally before
// returning (read-your-writes); its partitions are leaderless until the
// controller elects their leaders.
func (b *Broker) writeTopic(ctx context.Context, req metadata.CreateTopicRequest) (metadata.Topic, error) {
	t, err := b.store.CreateTopic(ctx, req)
	if err != nil {
		return metadata.Topic{}, err
	}
	if err := b.parts.applyTopic(t, nil); err != nil {
		return t, err
	}
	b.log.Info("topic created", "topic", t.Name, "partitions", len(t.Replicas))
	return t, nil
}

// loadTopicLocally reads a topic from metadata and applies it.
func (b *Broker) loadTopicLocally(ctx context.Context, name string) (topicView, error) {
	t, err := b.store.Topic(ctx, name)
	if err != nil {
		return topicView{}, err
	}
	states, err := b.store.PartitionStates(ctx, t.ID)
	if err != nil {
		return topicView{}, err
	}
	if err := b.parts.applyTopic(t, states); err != nil {
		return topicView{}, err
	}
	if v, ok := b.parts.topic(name); ok {
		return v, nil
	}
	return topicView{}, errUnknownTopic
}

// errorCode maps a Go error from metadata or a log to a Kafka error code
// and message.
func errorCode(err error) (int16, string) {
	switch {
	case errors.Is(err, metadata.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code, err.Error()
	case errors.Is(err, metadata.ErrTopicNotFound):
		return kerr.UnknownTopicOrPartition.Code, err.Error()
	case errors.Is(err, metadata.ErrInvalidConfig):
		return kerr.InvalidConfig.Code, err.Error()
	case errors.Is(err, metadata.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code, err.Error()
	case errors.Is(err, metadata.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code, err.Error()
	case errors.Is(err, metadata.ErrInvalidReplicas), errors.Is(err, controller.ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code, err.Error()
	case errors.Is(err, controller.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code, err.Error()
	case errors.Is(err, controller.ErrInvalidReplicationFactor):
		return kerr.InvalidReplicationFactor.Code, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, err.Error()
	}
	return kerr.UnknownServerError.Code, err.Error()
}
