package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// handleListPartitionReassignments (v0) lists the ongoing replica
// reassignments: Strata moves no replicas yet, so the list is empty for
// any topics asked for. Describe on the Cluster is needed
// (CLUSTER_AUTHORIZATION_FAILED).
func (b *Broker) handleListPartitionReassignments(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !b.authz.allowedCluster(rc, auth.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("not authorized to describe the cluster")
	}
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	return resp, nil
}
