package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleInitProducerID gives an idempotent producer a fresh producer id
// (epoch 0) from a block reserved in metadata.
//
// Transactions come with issue 6. Until then a transactional id gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED: non-retriable (a retriable code
// such as COORDINATOR_NOT_AVAILABLE would make clients retry forever), and
// every client surfaces it as a fatal error naming the transactional id,
// which is where the user must look. An empty transactional id is
// INVALID_REQUEST, as in Kafka.
func (b *Broker) handleInitProducerID(ctx context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		if *req.TransactionalID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code
		}
		return resp, nil
	}
	id, err := b.nextProducerID(ctx)
	if err != nil {
		b.log.Warn("allocating producer ids", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code // retriable: etcd may come back
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
