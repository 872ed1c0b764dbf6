package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endpointTypeBrokers is DescribeCluster's EndpointType for brokers (v1+);
// 2 asks for KRaft controllers, which Strata does not have.
const endpointTypeBrokers = 1

// handleDescribeCluster reports the cluster id, the elected controller and
// the live brokers. No authorization is needed, as Kafka; the Cluster's
// authorized_operations are computed when asked for.
func (b *Broker) handleDescribeCluster(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != endpointTypeBrokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("only broker endpoints are described")
		return resp, nil
	}
	resp.ClusterID = b.clusterID
	resp.ControllerID = controllerID(b.ctrl, b.cfg.NodeID)
	resp.ClusterAuthorizedOperations = authorizedOperationsUnknown
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.authz.clusterOperations(rc)
	}
	for _, info := range b.liveBrks.all() {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = info.NodeID, info.Host, info.Port
		if info.Rack != "" {
			br.Rack = kmsg.StringPtr(info.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	return resp, nil
}

// authorizedOperationsUnknown (INT32_MIN) says operations were not computed.
const authorizedOperationsUnknown = -2147483648
