package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
)

// AddOffsetsToTxn: v0-4. Adds the group's __consumer_offsets partition to
// the transaction, so its TxnOffsetCommit records get the marker.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. Write on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Read on the
// group (GROUP_AUTHORIZATION_FAILED) are needed.
func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.authz.allowedTxnID(rc, auth.OpWrite, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !b.authz.allowedGroup(rc, auth.OpRead, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	if _, err := b.ensureInternalTopic(ctx, offsetsTopic(b.groups)); err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: b.groups.PartitionFor(req.Group)}
	code, _ := b.txns.AddPartitions(txn.AddInput{ID: req.TransactionalID, ProducerID: req.ProducerID,
		ProducerEpoch: req.ProducerEpoch, Partitions: []txn.TopicPartition{tp}})
	resp.ErrorCode = txn.FencedForVersion(code, req.Version < 2)
	return resp, nil
}
