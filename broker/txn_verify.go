package broker

// Transactional produce is verified with the transaction's coordinator
// before the append (KIP-890; txn.Router.Verify and broker/txn/verify.go
// say how and with which codes). Requests without a transactional id are
// not verified (as Kafka, where only authorization applies to them).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

var _ txn.VerifyLog = (*hotlog.Log)(nil)

// txnVerifyErrorCode maps verification errors (and the log's rejection
// of an invalidated verification) to Kafka codes.
func txnVerifyErrorCode(err error) (int16, bool) {
	var ve *txn.VerifyError
	switch {
	case errors.As(err, &ve):
		return ve.Code, true
	case errors.Is(err, hotlog.ErrTxnNotVerified):
		return kerr.InvalidTxnState.Code, true
	}
	return 0, false
}

// verifyProduceTxn verifies, when needed, that p is in the ongoing
// transaction of the batches' producer. nil: append (the log re-checks
// that no marker intervened). With implicitAdd (Produce v12+, KIP-890
// part 2: the client no longer sends AddPartitionsToTxn) the coordinator
// adds the partition instead of only checking it; that is not optional,
// so DisableTxnPartitionVerification does not turn it off.
func (b *Broker) verifyProduceTxn(ctx context.Context, p *partition, txnID *string, pb recordbatch.Produced, implicitAdd bool) error {
	if !pb.Transactional || b.txnRouter == nil || txnID == nil || *txnID == "" {
		return nil
	}
	if b.cfg.DisableTxnPartitionVerification && !implicitAdd {
		return nil
	}
	return b.txnRouter.Verify(ctx, p.log, txn.Ask{ID: *txnID, ProducerID: pb.TxnProducerID,
		ProducerEpoch: pb.TxnEpoch, Topic: p.topic, Partition: p.index, Add: implicitAdd})
}
