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

// handleAlterPartitionReassignments (v0) begins, changes or cancels (null
// replicas) replica moves, KIP-455's semantics: the request only starts
// them; the controller completes each once its new replicas are in the
// ISR (controller.Reassign tells the steps). A new replica copies only the
// leader's local tail; the history stays in the bucket. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (a bad list, a
// broker that is not registered, or a diskless partition, which has no
// replicas to move), NO_REASSIGNMENT_IN_PROGRESS (a cancel
// with none running). Alter on the Cluster is needed
// (CLUSTER_AUTHORIZATION_FAILED). TimeoutMillis bounds the etcd work.
func (b *Broker) handleAlterPartitionReassignments(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !b.authz.allowedCluster(rc, auth.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("not authorized to alter the cluster")
		return resp, nil
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			if code, msg := b.reassign(ctx, rt.Topic, rp.Partition, rp.Replicas); code != 0 {
				sp.ErrorCode, sp.ErrorMessage = code, kmsg.StringPtr(msg)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// reassign begins (or changes, or with nil replicas cancels) one
// partition's move, a compare-and-swap of its assignment and state.
func (b *Broker) reassign(ctx context.Context, topic string, p int32, replicas []int32) (int16, string) {
	if _, _, ok := b.parts.disklessTopic(topic); ok {
		return kerr.InvalidReplicaAssignment.Code, disklessNoReplicasMessage
	}
	for _, r := range replicas {
		if !b.liveBrks.view().live(r) {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("broker %d is not registered", r)
		}
	}
	for range maxElectAttempts {
		t, err := b.store.Topic(ctx, topic)
		if errors.Is(err, metadata.ErrTopicNotFound) {
			return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", topic)
		}
		if err != nil {
			return errorCode(err)
		}
		if t.Diskless() { // metadata.CASAssignment refuses it too
			return kerr.InvalidReplicaAssignment.Code, disklessNoReplicasMessage
		}
		states, err := b.store.PartitionStates(ctx, t.ID)
		if err != nil {
			return errorCode(err)
		}
		if p < 0 || int(p) >= len(states) {
			return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%s-%d does not exist", topic, p)
		}
		next, err := controller.Reassign(states[p], replicas, time.Now().UnixMilli())
		switch {
		case errors.Is(err, controller.ErrNoReassignment):
			return kerr.NoReassignmentInProgress.Code, fmt.Sprintf("%s-%d is not being reassigned", topic, p)
		case errors.Is(err, controller.ErrInvalidReassignment):
			return kerr.InvalidReplicaAssignment.Code, err.Error()
		case err != nil:
			return errorCode(err)
		}
		if _, err = b.store.CASAssignment(ctx, t, p, next, nil); err == nil {
			b.log.Info("reassignment submitted", "topic", topic, "partition", p, "replicas", next.Replicas,
				"adding", next.AddingReplicas, "removing", next.RemovingReplicas, "cancel", replicas == nil)
			return 0, ""
		}
		if !errors.Is(err, metadata.ErrCASFailed) {
			return errorCode(err)
		}
	}
	return kerr.RequestTimedOut.Code, "the partition kept changing; try again"
}
