package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/metadata"
)

// handleCreatePartitions raises topics' partition counts. Alter on the
// topic is needed (TOPIC_AUTHORIZATION_FAILED).
func (b *Broker) handleCreatePartitions(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	counts := map[string]int{}
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		code, msg := kerr.InvalidRequest.Code, "duplicate topic name in request"
		if !b.authz.allowedTopic(rc, auth.OpAlter, rt.Topic) {
			code, msg = kerr.TopicAuthorizationFailed.Code, "not authorized to alter the topic"
		} else if counts[rt.Topic] == 1 {
			code, msg = b.createPartitions(ctx, rt, req.ValidateOnly)
		}
		if code != 0 {
			st.ErrorCode, st.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) createPartitions(ctx context.Context, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) (int16, string) {
	if err := validateTopicName(rt.Topic); err != nil {
		return kerr.InvalidTopicException.Code, err.Error()
	}
	t, ok := b.parts.topic(rt.Topic)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", rt.Topic)
	}
	current := len(t.topic.Replicas)
	switch {
	case int(rt.Count) <= current:
		return kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q has %d partitions; the new count %d must be larger", rt.Topic, current, rt.Count)
	case rt.Count > maxPartitions:
		return kerr.InvalidPartitions.Code, fmt.Sprintf("at most %d partitions", maxPartitions)
	}
	var added [][]int32
	var code int16
	var msg string
	if t.cfg.DisklessEnable {
		added, code, msg = newDisklessPartitions(rt, current)
	} else {
		added, code, msg = newPartitionReplicas(rt, current, len(t.topic.Replicas[0]), b.liveBrks.view())
	}
	if code != 0 || validateOnly {
		return code, msg
	}
	updated, err := b.store.AddPartitions(ctx, rt.Topic, added)
	if err != nil {
		return errorCode(err)
	}
	if err := b.parts.applyTopic(updated, nil); err != nil {
		return errorCode(err)
	}
	b.parts.awaitLeaders(ctx, updated.ID, current, leaderElectionWait, &b.liveBrks, b.log)
	b.log.Info("partitions added", "topic", rt.Topic, "partitions", len(updated.Replicas))
	return 0, ""
}

// newDisklessPartitions is the assignment of partitions added to a
// diskless topic: empty lists, and no manual assignment.
func newDisklessPartitions(rt kmsg.CreatePartitionsRequestTopic, current int) ([][]int32, int16, string) {
	if rt.Assignment != nil {
		return nil, kerr.InvalidReplicaAssignment.Code, disklessAssignmentMessage
	}
	return metadata.DisklessAssignment(int(rt.Count) - current), 0, ""
}

// newPartitionReplicas checks the manual assignment of the new partitions
// or places them with the topic's replication factor.
func newPartitionReplicas(rt kmsg.CreatePartitionsRequestTopic, current, rf int, view brokerView) ([][]int32, int16, string) {
	newCount := int(rt.Count) - current
	var out [][]int32
	var err error
	if rt.Assignment == nil {
		out, err = controller.PlaceAdded(view.list, current, newCount, rf)
	} else if len(rt.Assignment) != newCount {
		return nil, kerr.InvalidReplicaAssignment.Code,
			fmt.Sprintf("%d assignments given for %d new partitions", len(rt.Assignment), newCount)
	} else {
		out = make([][]int32, newCount)
		for i, a := range rt.Assignment {
			out[i] = nonNil(a.Replicas)
		}
		err = controller.CheckAssignment(out, rf, view.live)
	}
	if err != nil {
		code, msg := errorCode(err)
		return nil, code, msg
	}
	return out, 0, ""
}
