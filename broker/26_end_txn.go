package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/txn"
)

// EndTxn: v0-5. The answer comes once PrepareCommit/PrepareAbort is
// durable; the markers follow in the background (txn.Coordinator), and the
// id answers CONCURRENT_TRANSACTIONS until they are all written. v5+
// bumps the epoch (KIP-890) and returns the new producer id and epoch.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. Write on the
// transactional id is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func (b *Broker) handleEndTxn(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !b.authz.allowedTxnID(rc, auth.OpWrite, req.TransactionalID) {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
		return resp, nil
	}
	r := b.txns.EndTxn(txn.EndInput{ID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Commit: req.Commit, Bump: req.Version >= 5})
	resp.ErrorCode = txn.FencedForVersion(r.Code, req.Version < 2)
	resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	return resp, nil
}
