package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// handleListPartitionReassignments (v0) lists the ongoing replica moves
// (partitions whose state has adding or removing replicas), of the topics
// asked for or of every topic (null topics), from this broker's view of
// the partition states. Describe on the Cluster is needed
// (CLUSTER_AUTHORIZATION_FAILED).
func (b *Broker) handleListPartitionReassignments(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	if !b.authz.allowedCluster(rc, auth.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("not authorized to describe the cluster")
		return resp, nil
	}
	wanted := map[string][]int32{} // nil slice: every partition
	if req.Topics != nil {
		for _, rt := range req.Topics {
			wanted[rt.Topic] = append(wanted[rt.Topic], rt.Partitions...)
		}
	}
	for _, tv := range b.parts.allTopics() {
		parts, asked := wanted[tv.topic.Name]
		if req.Topics != nil && !asked {
			continue
		}
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = tv.topic.Name
		for p, state := range tv.states {
			if !state.Reassigning() || (parts != nil && !containsInt32(parts, int32(p))) {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = int32(p)
			sp.Replicas = nonNil(state.Replicas)
			sp.AddingReplicas, sp.RemovingReplicas = nonNil(state.AddingReplicas), nonNil(state.RemovingReplicas)
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return resp, nil
}

func containsInt32(list []int32, v int32) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
