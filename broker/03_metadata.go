package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// handleMetadata describes brokers, the cluster and the asked-for topics
// (all of them for a null list, or an empty one before v1), creating
// unknown topics when the client allows and auto.create.topics.enable.
//
// Authorization: the full list omits topics the principal may
// not Describe; a topic asked for by name or id without Describe is
// TOPIC_AUTHORIZATION_FAILED (for names that do not exist too, so that
// existence does not leak), and auto-creation needs Create on the Cluster
// or on the topic (TOPIC_AUTHORIZATION_FAILED). authorized_operations
// (v8+) are computed when asked for.
func (b *Broker) handleMetadata(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	view := b.liveBrks.view()
	for _, info := range view.list {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = info.NodeID, info.Host, info.Port
		if info.Rack != "" {
			br.Rack = kmsg.StringPtr(info.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	resp.ControllerID = controllerID(b.ctrl, b.cfg.NodeID)
	resp.AuthorizedOperations = authorizedOperationsUnknown
	if req.IncludeClusterAuthorizedOperations && req.Version <= 10 {
		resp.AuthorizedOperations = b.authz.clusterOperations(rc)
	}
	defer b.authz.addTopicOperations(rc, req, resp)
	rack := clientRack(rc.clientID)
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range b.parts.allTopics() {
			if b.authz.allowedQuiet(rc, auth.OpDescribe, auth.ResourceTopic, t.topic.Name) {
				resp.Topics = append(resp.Topics, metadataTopic(t, view, rack))
			}
		}
		return resp, nil
	}
	autoCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && !b.cfg.DisableAutoCreateTopics
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, b.metadataForRequested(ctx, rc, rt, autoCreate, view, rack))
	}
	return resp, nil
}

// clusterOperations is the Cluster's authorized_operations: 0
// without Describe on it, as Kafka.
func (z *authorizer) clusterOperations(rc *requestContext) int32 {
	if !z.allowedQuiet(rc, auth.OpDescribe, auth.ResourceCluster, auth.ClusterResourceName) {
		return 0
	}
	return z.operations(rc, auth.ResourceCluster, auth.ClusterResourceName)
}

// addTopicOperations fills the described topics'
// authorized_operations when the client asks (v8+).
func (z *authorizer) addTopicOperations(rc *requestContext, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if !req.IncludeTopicAuthorizedOperations {
		return
	}
	for i := range resp.Topics {
		if mt := &resp.Topics[i]; mt.ErrorCode == 0 && mt.Topic != nil {
			mt.AuthorizedOperations = z.operations(rc, auth.ResourceTopic, *mt.Topic)
		}
	}
}

// metadataForRequested answers one requested topic, by name or (v10+) id.
func (b *Broker) metadataForRequested(ctx context.Context, rc *requestContext, rt kmsg.MetadataRequestTopic, autoCreate bool,
	view brokerView, rack string,
) kmsg.MetadataResponseTopic {
	if rt.Topic == nil {
		t, ok := b.parts.topicByID(rt.TopicID)
		if ok && b.authz.allowedTopic(rc, auth.OpDescribe, t.topic.Name) {
			return metadataTopic(t, view, rack)
		}
		code := kerr.UnknownTopicID.Code
		if ok {
			code = kerr.TopicAuthorizationFailed.Code
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.TopicID, mt.ErrorCode = rt.TopicID, code
		mt.AuthorizedOperations = authorizedOperationsUnknown
		return mt
	}
	name := *rt.Topic
	errTopic := func(code int16) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), code
		mt.AuthorizedOperations = authorizedOperationsUnknown
		return mt
	}
	if !b.authz.allowedTopic(rc, auth.OpDescribe, name) {
		return errTopic(kerr.TopicAuthorizationFailed.Code)
	}
	if t, ok := b.parts.topic(name); ok {
		return metadataTopic(t, view, rack)
	}
	if validateTopicName(name) != nil {
		return errTopic(kerr.InvalidTopicException.Code)
	}
	if !autoCreate {
		return errTopic(kerr.UnknownTopicOrPartition.Code)
	}
	if !b.authz.allowedCluster(rc, auth.OpCreate) && !b.authz.allowedTopic(rc, auth.OpCreate, name) {
		return errTopic(kerr.TopicAuthorizationFailed.Code)
	}
	if err := b.autoCreateTopic(ctx, name); err != nil {
		b.log.Warn("auto-creating topic", "topic", name, "err", err)
	}
	// As Kafka: a topic created by this request is answered without
	// partitions and with a retriable error; the client asks again once
	// leaders are elected.
	return errTopic(kerr.LeaderNotAvailable.Code)
}

// autoCreateTopic creates name with the default partition count and
// replication factor, without waiting for leaders; losing a race to another
// creator is fine.
func (b *Broker) autoCreateTopic(ctx context.Context, name string) error {
	spec := topicSpec{name: name, partitions: b.cfg.DefaultPartitions, replicationFactor: b.cfg.DefaultReplicationFactor}
	replicas, code, msg := placeReplicas(spec, b.liveBrks.view())
	if code != 0 {
		return errors.New(msg)
	}
	_, err := b.writeTopic(ctx, metadata.CreateTopicRequest{Name: name, Replicas: replicas})
	if errors.Is(err, metadata.ErrTopicExists) {
		_, err = b.loadTopicLocally(ctx, name)
	}
	return err
}

// metadataTopic describes one known topic; rack is the client's
// (clientRack), which places a diskless topic's partitions
// (disklessMetadataPartitions).
func metadataTopic(t topicView, view brokerView, rack string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.topic.Name)
	mt.TopicID = t.topic.ID
	mt.IsInternal = t.topic.Internal
	mt.AuthorizedOperations = authorizedOperationsUnknown
	if t.cfg.DisklessEnable {
		mt.Partitions = disklessMetadataPartitions(t, view, rack)
		return mt
	}
	for i, st := range t.states {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader, mp.LeaderEpoch = view.leaderOf(st), st.LeaderEpoch
		mp.Replicas, mp.ISR = nonNil(st.Replicas), nonNil(st.ISR)
		mp.OfflineReplicas = []int32{}
		for _, r := range st.Replicas {
			if !view.live(r) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	if mt.Partitions == nil {
		mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	}
	return mt
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
