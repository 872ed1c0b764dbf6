package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/txn"
)

// handleInitProducerID: v0-5. Without a transactional id, an idempotent
// producer gets a fresh producer id (epoch 0) from a block reserved in
// metadata. With one, the transaction coordinator of the id answers
// (broker/txn): a new epoch fencing older producers (an ongoing
// transaction is aborted first: CONCURRENT_TRANSACTIONS until done),
// INVALID_TRANSACTION_TIMEOUT outside (0, transaction.max.timeout.ms].
// An empty transactional id is INVALID_REQUEST, as in Kafka.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4. Authorization:
// Write on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
// without one, IdempotentWrite on the Cluster or Write on some topic
// (CLUSTER_AUTHORIZATION_FAILED), as Kafka since KIP-679.
func (b *Broker) handleInitProducerID(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		if !b.authz.allowedTxnID(rc, auth.OpWrite, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
		in := txn.InitInput{ID: *req.TransactionalID, TimeoutMs: req.TransactionTimeoutMillis, ProducerID: -1, ProducerEpoch: -1}
		if req.Version >= 3 {
			in.ProducerID, in.ProducerEpoch = req.ProducerID, req.ProducerEpoch
		}
		r := b.txns.InitProducerID(in)
		resp.ErrorCode = txn.FencedForVersion(r.Code, req.Version < 4)
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
		return resp, nil
	}
	if b.cfg.Authorizer && !b.authz.allowedIdempotentWrite(rc) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, err := b.pids.Allocate(ctx)
	if err != nil {
		b.log.Warn("allocating producer ids", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code // retriable: etcd may come back
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
