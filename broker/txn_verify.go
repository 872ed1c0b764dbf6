package broker

// KIP-890 part 1 (Kafka 3.6+ transaction.partition.verification.enable):
// before the leader appends a transactional batch that would open a
// transaction in the partition (its producer has no ongoing transaction
// here at that epoch), it asks the coordinator of the request's
// transactional id, with AddPartitionsToTxn v4+ VerifyOnly, whether the
// partition is in the ongoing transaction. So a produce that arrives after
// its transaction ended (a late retry) cannot open a transaction that no
// marker will ever close (a "hanging" transaction that pins the LSO).
//
// The check runs before the append takes the replica lock, so other
// partitions and connections are not held up by the round trip. The race
// with a marker between the answer and the append is closed in the log:
// hotlog.StartTxnVerification / ConfirmTxnVerification keep a per-producer
// verification entry that a marker invalidates, and the append rejects a
// transactional batch whose entry is not confirmed (hotlog.ErrTxnNotVerified).
//
// Codes, as Kafka 3.6: a partition not in the transaction is
// INVALID_TXN_STATE (fatal to the client's transaction, so it aborts); a
// fenced epoch INVALID_PRODUCER_EPOCH; an unknown producer
// INVALID_PRODUCER_ID_MAPPING; coordinator unavailability, loading,
// NOT_COORDINATOR, CONCURRENT_TRANSACTIONS and transport failures
// NOT_ENOUGH_REPLICAS, which every client retries. Requests without a
// transactional id are not verified (as Kafka, where only authorization
// applies to them).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/hotlog"
)

// errTxnVerification: the verification failed; txnVerifyError carries the
// Kafka code.
var errTxnVerification = errors.New("broker: transaction verification failed")

// txnVerifyTimeout bounds one verification round trip to a peer.
const txnVerifyTimeout = 5 * time.Second

// txnVerifyError is a failed verification with its produce error code.
type txnVerifyError struct {
	code int16
	msg  string
}

func (e *txnVerifyError) Error() string {
	return fmt.Sprintf("%v: %s (%s)", errTxnVerification, e.msg, kerr.ErrorForCode(e.code))
}

func (e *txnVerifyError) Unwrap() error { return errTxnVerification }

// txnVerifyErrorCode maps verification errors (and the log's rejection
// of an invalidated verification) to Kafka codes.
func txnVerifyErrorCode(err error) (int16, bool) {
	var ve *txnVerifyError
	switch {
	case errors.As(err, &ve):
		return ve.code, true
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
func (b *Broker) verifyProduceTxn(ctx context.Context, p *partition, txnID *string, pb producedBatches, implicitAdd bool) error {
	if !pb.transactional || b.txns == nil || txnID == nil || *txnID == "" {
		return nil
	}
	if b.cfg.DisableTxnPartitionVerification && !implicitAdd {
		return nil
	}
	ask := txnPartitionAsk{txnID: *txnID, pid: pb.txnProducerID, epoch: pb.txnEpoch,
		topic: p.topic, partition: p.index, add: implicitAdd}
	deadline := time.Now().Add(concurrentTxnRetryFor)
	for {
		guard, needed := p.log.StartTxnVerification(pb.txnProducerID, pb.txnEpoch)
		if !needed {
			return nil
		}
		code, msg := b.askTxnPartitionOnce(ctx, ask)
		// Under transaction version 2 the previous transaction's markers
		// carry the epoch the next transaction uses, so an implicit add
		// that raced them (CONCURRENT_TRANSACTIONS, or a marker landing
		// between the answer and the append) asks again with a fresh
		// guard: the coordinator stays the judge of whether the partition
		// may join, and the new guard catches any later marker.
		retry := implicitAdd && time.Now().Before(deadline) && ctx.Err() == nil
		switch {
		case code == kerr.ConcurrentTransactions.Code && retry:
			time.Sleep(concurrentTxnRetryBackoff)
			continue
		case code != 0:
			return &txnVerifyError{code: produceVerifyCode(code), msg: msg}
		case p.log.ConfirmTxnVerification(pb.txnProducerID, guard):
			return nil
		case !retry:
			return &txnVerifyError{code: kerr.InvalidTxnState.Code, msg: "the transaction ended during verification"}
		}
	}
}

// produceVerifyCode turns a coordinator's answer into the produce code.
func produceVerifyCode(code int16) int16 {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.OperationNotAttempted.Code, kerr.RequestTimedOut.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// txnPartitionAsk is one partition question to a transaction coordinator:
// is it in the producer's ongoing transaction (add false: KIP-890 part 1
// verification), or add it (add true: part 2's implicit add, for Produce
// v12+ and TxnOffsetCommit v5+).
type txnPartitionAsk struct {
	txnID     string
	pid       int64
	epoch     int16
	topic     string
	partition int32
	add       bool
}

// Implicit adds retry CONCURRENT_TRANSACTIONS inside the broker, as Kafka's
// AddPartitionsToTxnManager does: a TV2 client starts its next transaction
// as soon as EndTxn answers, usually while the previous transaction's
// markers are still being written, and answering the client would cost it
// a retry backoff (or, for TxnOffsetCommit, the transaction).
const (
	concurrentTxnRetryFor     = 2 * time.Second
	concurrentTxnRetryBackoff = 10 * time.Millisecond
)

// askTxnPartition asks the coordinator of a.txnID (this broker, in process,
// or a peer) about one partition. It returns the partition's code and a
// message.
func (b *Broker) askTxnPartition(ctx context.Context, a txnPartitionAsk) (int16, string) {
	deadline := time.Now().Add(concurrentTxnRetryFor)
	for {
		code, msg := b.askTxnPartitionOnce(ctx, a)
		if code != kerr.ConcurrentTransactions.Code || !a.add || time.Now().After(deadline) {
			return code, msg
		}
		select {
		case <-ctx.Done():
			return code, msg
		case <-time.After(concurrentTxnRetryBackoff):
		}
	}
}

func (b *Broker) askTxnPartitionOnce(ctx context.Context, a txnPartitionAsk) (int16, string) {
	txnID, pid, epoch, topic, partition := a.txnID, a.pid, a.epoch, a.topic, a.partition
	if _, ok := b.parts.topic(txn.TopicName); !ok {
		// InitProducerId creates it before any transactional produce, so
		// this broker's metadata lags: retriable, and never create it here.
		return kerr.CoordinatorNotAvailable.Code, txn.TopicName + " not known yet"
	}
	info, code, msg := b.txnCoordinatorOf(ctx, txnID)
	if code != 0 {
		return code, msg
	}
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = txnID, pid, epoch, !a.add
	rtt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rtt.Topic, rtt.Partitions = topic, []int32{partition}
	rt.Topics = append(rt.Topics, rtt)
	if info.NodeID == b.cfg.NodeID {
		return verifyAnswer(b.addPartitionsTxn(5, rt), topic, partition)
	}
	return b.askPeerTxnVerify(ctx, info.NodeID, rt, topic, partition)
}

// askPeerTxnVerify sends the verify-only request to the coordinator node.
func (b *Broker) askPeerTxnVerify(ctx context.Context, node int32, rt kmsg.AddPartitionsToTxnRequestTransaction,
	topic string, partition int32,
) (int16, string) {
	cl, err := b.txnPeers.peer(b, node)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	req.Transactions = append(req.Transactions, rt)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("verifying with broker %d: %v", node, err)
	}
	resp, ok := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if !ok {
		return kerr.CoordinatorNotAvailable.Code, "unexpected response type"
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, "coordinator error"
	}
	for _, t := range resp.Transactions {
		if t.TransactionalID == rt.TransactionalID {
			return verifyAnswer(t, topic, partition)
		}
	}
	return kerr.CoordinatorNotAvailable.Code, "coordinator did not answer for the transaction"
}

// verifyAnswer extracts the partition's code from a transaction's answer.
func verifyAnswer(t kmsg.AddPartitionsToTxnResponseTransaction, topic string, partition int32) (int16, string) {
	for _, rt := range t.Topics {
		if rt.Topic != topic {
			continue
		}
		for _, p := range rt.Partitions {
			if p.Partition == partition {
				if p.ErrorCode == kerr.InvalidTxnState.Code {
					return p.ErrorCode, fmt.Sprintf("%s-%d is not in the ongoing transaction", topic, partition)
				}
				return p.ErrorCode, "verification answer"
			}
		}
	}
	return kerr.CoordinatorNotAvailable.Code, "coordinator did not answer for the partition"
}
