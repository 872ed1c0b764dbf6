package txn

// KIP-890 part 1 (Kafka 3.6+ transaction.partition.verification.enable):
// before a partition leader appends a transactional batch that would open
// a transaction in the partition (its producer has no ongoing transaction
// there at that epoch), it asks the coordinator of the request's
// transactional id, with AddPartitionsToTxn v4+ VerifyOnly, whether the
// partition is in the ongoing transaction. So a produce that arrives after
// its transaction ended (a late retry) cannot open a transaction that no
// marker will ever close (a "hanging" transaction that pins the LSO).
//
// The check runs before the append takes the replica lock, so other
// partitions and connections are not held up by the round trip. The race
// with a marker between the answer and the append is closed in the log
// (VerifyLog): it keeps a per-producer verification entry that a marker
// invalidates, and the append rejects a transactional batch whose entry
// is not confirmed.
//
// Codes, as Kafka 3.6: a partition not in the transaction is
// INVALID_TXN_STATE (fatal to the client's transaction, so it aborts); a
// fenced epoch INVALID_PRODUCER_EPOCH; an unknown producer
// INVALID_PRODUCER_ID_MAPPING; coordinator unavailability, loading,
// NOT_COORDINATOR, CONCURRENT_TRANSACTIONS and transport failures
// NOT_ENOUGH_REPLICAS, which every client retries.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrVerification: a transactional produce's verification failed;
// *VerifyError carries the Kafka code.
var ErrVerification = errors.New("txn: transaction verification failed")

// VerifyError is a failed verification with its produce error code.
type VerifyError struct {
	Code int16
	msg  string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("%v: %s (%s)", ErrVerification, e.msg, kerr.ErrorForCode(e.Code))
}

func (e *VerifyError) Unwrap() error { return ErrVerification }

// verifyTimeout bounds one question to a peer coordinator.
const verifyTimeout = 5 * time.Second

// Implicit adds retry CONCURRENT_TRANSACTIONS inside the broker, as Kafka's
// AddPartitionsToTxnManager does: a TV2 client starts its next transaction
// as soon as EndTxn answers, usually while the previous transaction's
// markers are still being written, and answering the client would cost it
// a retry backoff (or, for TxnOffsetCommit, the transaction).
const (
	concurrentRetryFor     = 2 * time.Second
	concurrentRetryBackoff = 10 * time.Millisecond
)

// Ask is one partition question to a transaction coordinator: is it in
// the producer's ongoing transaction (Add false: KIP-890 part 1
// verification), or add it (Add true: part 2's implicit add, for Produce
// v12+ and TxnOffsetCommit v5+).
type Ask struct {
	ID            string // transactional id
	ProducerID    int64
	ProducerEpoch int16
	Topic         string
	Partition     int32
	Add           bool
}

// VerifyLog is the partition log's side of a verification (hotlog.Log):
// StartTxnVerification opens a verification entry for the producer (needed
// false: the producer already has an ongoing transaction there), and
// ConfirmTxnVerification confirms it unless a marker invalidated it since.
type VerifyLog interface {
	StartTxnVerification(producerID int64, epoch int16) (guard uint64, needed bool)
	ConfirmTxnVerification(producerID int64, guard uint64) bool
}

// Verify checks, when log needs it, that a.Partition is in the ongoing
// transaction (or, with a.Add, adds it). nil: append (the log re-checks
// that no marker intervened); otherwise a *VerifyError.
func (r *Router) Verify(ctx context.Context, log VerifyLog, a Ask) error {
	deadline := time.Now().Add(concurrentRetryFor)
	for {
		guard, needed := log.StartTxnVerification(a.ProducerID, a.ProducerEpoch)
		if !needed {
			return nil
		}
		code, msg := r.askOnce(ctx, a)
		// Under transaction version 2 the previous transaction's markers
		// carry the epoch the next transaction uses, so an implicit add
		// that raced them (CONCURRENT_TRANSACTIONS, or a marker landing
		// between the answer and the append) asks again with a fresh
		// guard: the coordinator stays the judge of whether the partition
		// may join, and the new guard catches any later marker.
		retry := a.Add && time.Now().Before(deadline) && ctx.Err() == nil
		switch {
		case code == kerr.ConcurrentTransactions.Code && retry:
			time.Sleep(concurrentRetryBackoff)
			continue
		case code != 0:
			return &VerifyError{Code: produceVerifyCode(code), msg: msg}
		case log.ConfirmTxnVerification(a.ProducerID, guard):
			return nil
		case !retry:
			return &VerifyError{Code: kerr.InvalidTxnState.Code, msg: "the transaction ended during verification"}
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

// ask asks the coordinator of a.ID (this broker, in process, or a peer)
// about one partition, retrying CONCURRENT_TRANSACTIONS of an implicit add
// for a while. It returns the partition's code and a message.
func (r *Router) ask(ctx context.Context, a Ask) (int16, string) {
	deadline := time.Now().Add(concurrentRetryFor)
	for {
		code, msg := r.askOnce(ctx, a)
		if code != kerr.ConcurrentTransactions.Code || !a.Add || time.Now().After(deadline) {
			return code, msg
		}
		select {
		case <-ctx.Done():
			return code, msg
		case <-time.After(concurrentRetryBackoff):
		}
	}
}

// AddImplicitly adds a.Partition to the transaction for a request that no
// longer names it in AddPartitionsToTxn (TxnOffsetCommit v5+ adds the
// group's offsets partition; a.Add is implied). It returns the request's
// code: a partition the coordinator cannot add now is retriable
// (CONCURRENT_TRANSACTIONS while the previous transaction's markers are
// written; COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR while it moves).
func (r *Router) AddImplicitly(ctx context.Context, a Ask) int16 {
	a.Add = true
	code, _ := r.ask(ctx, a)
	if code == kerr.OperationNotAttempted.Code || code == kerr.RequestTimedOut.Code {
		return kerr.CoordinatorNotAvailable.Code
	}
	return code
}

func (r *Router) askOnce(ctx context.Context, a Ask) (int16, string) {
	if !r.cluster.TopicKnown(TopicName) {
		// InitProducerId creates it before any transactional produce, so
		// this broker's metadata lags: retriable, and never create it here.
		return kerr.CoordinatorNotAvailable.Code, TopicName + " not known yet"
	}
	node, code, msg := r.cluster.Coordinator(ctx, a.ID)
	if code != 0 {
		return code, msg
	}
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = a.ID, a.ProducerID, a.ProducerEpoch, !a.Add
	rtt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rtt.Topic, rtt.Partitions = a.Topic, []int32{a.Partition}
	rt.Topics = append(rt.Topics, rtt)
	if node == r.node {
		return verifyAnswer(r.AddPartitions(5, rt), a.Topic, a.Partition)
	}
	return r.askPeer(ctx, node, rt, a.Topic, a.Partition)
}
