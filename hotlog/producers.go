package hotlog

// Producer state: what the log remembers of each idempotent producer, so
// that a retried batch is recognised on the leader even after a failover,
// a restart or a truncation. See doc.go, "Producer state", for the rules and
// producers_snapshot.go for the snapshot files.

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// Producer-state sentinel errors, translated to Kafka codes at the edge.
var (
	// ErrOutOfOrderSequence: a sequence gap within an epoch, or a new epoch
	// not starting at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("hotlog: out of order sequence number")
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than the
	// one the partition knows (INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("hotlog: invalid producer epoch")
	// ErrUnknownProducerID (UNKNOWN_PRODUCER_ID) is not returned by the
	// append path: since KIP-360 (Kafka 2.5) a producer the partition does
	// not know is accepted with any sequence, as Kafka 3.x/4.x do. It is
	// defined for the transactional checks.
	ErrUnknownProducerID = errors.New("hotlog: unknown producer id")
	// ErrTxnNotVerified: a transactional batch whose KIP-890 verification
	// was invalidated by a marker before the append (INVALID_TXN_STATE).
	ErrTxnNotVerified = errors.New("hotlog: transactional batch not verified for the ongoing transaction")
)

// Producer-state constants. maxProducerBatches is part of the snapshot
// format (a bound the decoder enforces); never lower it.
const (
	// maxProducerBatches is how many recent batches per producer are kept
	// for duplicate detection: Kafka's max.in.flight bound (5).
	maxProducerBatches = 5
	// noProducerEpoch, noSequence, noOffset: Kafka's "none" values.
	noProducerEpoch = -1
	noSequence      = -1
	noOffset        = -1
	// DefaultProducerIDExpiration is Kafka's producer.id.expiration.ms.
	DefaultProducerIDExpiration = 24 * time.Hour
)

// producerBatch is what the table remembers of one idempotent batch.
type producerBatch struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
	maxTimestamp           int64
}

// producerEntry is one producer's state in one partition.
//
// Invariant: batches[:n] all have epoch == the entry's epoch (an epoch change
// clears them), oldest first, offsets increasing.
type producerEntry struct {
	epoch         int16
	n             int // batches in use, <= maxProducerBatches
	batches       [maxProducerBatches]producerBatch
	lastTimestamp int64 // maxTimestamp of the last batch or marker
	// lastSeenMs is the wall-clock time of the producer's last append (or
	// of the load that brought it back), in memory only. Expiry counts
	// from the later of it and lastTimestamp: record timestamps are the
	// client's, and a producer writing old timestamps (a replay, a backfill)
	// must not lose its state — and with it duplicate detection — at the
	// next retention check.
	lastSeenMs int64
	// coordinatorEpoch and currentTxnFirstOffset are for transactions:
	// the last marker's coordinator epoch and the first offset
	// of the open transaction; -1 when none.
	coordinatorEpoch      int32
	currentTxnFirstOffset int64
}

func newProducerEntry() producerEntry {
	return producerEntry{epoch: noProducerEpoch, lastTimestamp: -1, coordinatorEpoch: -1, currentTxnFirstOffset: noOffset}
}

// lastSeq is the last sequence of the newest batch, or noSequence.
func (e *producerEntry) lastSeq() int32 {
	if e.n == 0 {
		return noSequence
	}
	return e.batches[e.n-1].lastSeq
}

// setEpoch moves the entry to epoch, forgetting the batches of another one.
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch, e.n = epoch, 0
	}
}

// addBatch remembers b, dropping the oldest batch when full.
func (e *producerEntry) addBatch(epoch int16, b producerBatch) {
	e.setEpoch(epoch)
	if e.n == maxProducerBatches {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
	e.lastTimestamp = b.maxTimestamp
}

// findDuplicate returns the remembered batch h retries, if any: same epoch
// and the same first and last sequence (Kafka's findDuplicateBatch).
func (e *producerEntry) findDuplicate(h recordbatch.Header) (producerBatch, bool) {
	if e.epoch != h.ProducerEpoch {
		return producerBatch{}, false
	}
	last := lastSequence(h)
	for _, b := range e.batches[:e.n] {
		if b.firstSeq == h.BaseSequence && b.lastSeq == last {
			return b, true
		}
	}
	return producerBatch{}, false
}

// lastSequence is the sequence of h's last record; sequences wrap from
// MaxInt32 to 0 as Kafka's (DefaultRecordBatch.incrementSequence).
func lastSequence(h recordbatch.Header) int32 {
	return incrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// inSequence reports whether next directly follows last (with wrap).
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// idempotent reports whether a batch carries producer state: a producer id
// (Kafka's hasProducerId: id >= 0).
func idempotent(h recordbatch.Header) bool { return h.ProducerID >= 0 }

// producerTable is the partition's producer state.
//
// Owner: Log.appendMu. Every read and write happens with it held (or,
// during Open, before the log is published).
type producerTable struct {
	entries map[int64]*producerEntry
	// ongoing mirrors the entries' open transactions (producer id -> first
	// offset) so the first unstable offset costs O(open transactions). nil
	// after a load: ongoingTxns builds it from the entries.
	ongoing map[int64]int64
	// verifying holds KIP-890 part 1 verification state (txn_verify in
	// package broker): per producer id, in memory only (as Kafka's
	// verification entries). nil until the first verification; a load
	// drops it, which invalidates pending verifications (safe: rejected).
	verifying map[int64]txnVerification
	// nextGuard numbers verifications.
	nextGuard uint64
}

// txnVerification is one producer's verification state in the partition.
// A marker turns it into a tombstone (guard 0): an append that was
// verified before the marker must not open a new transaction.
type txnVerification struct {
	epoch    int16
	guard    uint64 // 0: tombstone, invalidated by a marker
	verified bool   // the coordinator confirmed the partition is in the txn
	atMs     int64  // when started, for expiry
}

func newProducerTable() producerTable {
	return producerTable{entries: map[int64]*producerEntry{}}
}

// duplicateOf returns the original offsets when the client append hdrs is
// a retry: the first batch that duplicates a remembered one decides, as in
// Kafka (a produce request carries one batch per partition).
func (t *producerTable) duplicateOf(hdrs []recordbatch.Header) (producerBatch, bool) {
	for _, h := range hdrs {
		if !idempotent(h) || h.Control() {
			continue
		}
		if e, ok := t.entries[h.ProducerID]; ok {
			if b, dup := e.findDuplicate(h); dup {
				return b, true
			}
		}
	}
	return producerBatch{}, false
}

// checkClient validates a leader append (Kafka's ProducerAppendInfo with
// origin CLIENT) without changing the table: each batch is checked against
// the state left by the batches before it in the same append.
func (t *producerTable) checkClient(hdrs []recordbatch.Header) error {
	var pending map[int64]*producerEntry
	for _, h := range hdrs {
		if !idempotent(h) || h.Control() {
			continue
		}
		if pending == nil {
			pending = map[int64]*producerEntry{}
		}
		cur, known := t.entries[h.ProducerID]
		upd, ok := pending[h.ProducerID]
		if !ok {
			e := newProducerEntry()
			if known {
				e = *cur
			}
			upd = &e
			pending[h.ProducerID] = upd
		}
		if err := checkBatch(upd, known && cur.epoch != noProducerEpoch, h); err != nil {
			return err
		}
		if err := t.checkVerified(upd, h); err != nil {
			return err
		}
		upd.addBatch(h.ProducerEpoch, producerBatch{firstSeq: h.BaseSequence, lastSeq: lastSequence(h)})
	}
	return nil
}

// checkBatch applies the epoch and sequence rules to one data batch. upd is
// the producer's state so far; knownEpoch says the partition knew an epoch
// for it before this append (otherwise any sequence is accepted: its state
// expired or was never seen, KIP-360).
func checkBatch(upd *producerEntry, knownEpoch bool, h recordbatch.Header) error {
	switch {
	case h.ProducerEpoch < upd.epoch:
		return fmt.Errorf("%w: producer %d epoch %d, partition knows epoch %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, upd.epoch)
	case h.ProducerEpoch != upd.epoch:
		if h.BaseSequence != 0 && upd.epoch != noProducerEpoch {
			return fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
	case knownEpoch && !inSequence(upd.lastSeq(), h.BaseSequence):
		return fmt.Errorf("%w: producer %d epoch %d sequence %d, expected %d",
			ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, incrementSequence(upd.lastSeq(), 1))
	}
	return nil
}

// apply updates the table with a batch written at its final offsets. It
// never rejects: followers and recovery mirror what the leader wrote
// (Kafka's origin REPLICATION).
func (t *producerTable) apply(h recordbatch.Header) {
	if !idempotent(h) {
		return
	}
	e, ok := t.entries[h.ProducerID]
	if !ok {
		ne := newProducerEntry()
		e = &ne
		t.entries[h.ProducerID] = e
	}
	if h.Control() {
		// A transaction marker ends the open transaction. Its coordinator
		// epoch is in the record body: applyBatch (txn.go) sets it.
		e.setEpoch(h.ProducerEpoch)
		e.currentTxnFirstOffset = noOffset
		e.lastTimestamp = h.MaxTimestamp
		if t.ongoing != nil {
			delete(t.ongoing, h.ProducerID)
		}
		if v, ok := t.verifying[h.ProducerID]; ok {
			t.verifying[h.ProducerID] = txnVerification{epoch: v.epoch, atMs: v.atMs}
		}
		return
	}
	e.addBatch(h.ProducerEpoch, producerBatch{firstSeq: h.BaseSequence, lastSeq: lastSequence(h),
		baseOffset: h.BaseOffset, lastOffset: h.LastOffset(), maxTimestamp: h.MaxTimestamp})
	if h.Transactional() && e.currentTxnFirstOffset == noOffset {
		e.currentTxnFirstOffset = h.BaseOffset
		if t.ongoing != nil {
			t.ongoing[h.ProducerID] = h.BaseOffset
		}
	}
}

// expire drops producers whose last timestamp is at least maxAge before
// nowMs and that have no open transaction (Kafka's isProducerExpired).
// It returns how many went.
func (t *producerTable) expire(nowMs int64, maxAge time.Duration) int {
	n := 0
	for id, e := range t.entries {
		if e.currentTxnFirstOffset == noOffset && nowMs-max(e.lastTimestamp, e.lastSeenMs) >= maxAge.Milliseconds() {
			delete(t.entries, id)
			n++
		}
	}
	for id, v := range t.verifying {
		if nowMs-v.atMs >= maxAge.Milliseconds() {
			delete(t.verifying, id)
		}
	}
	return n
}

// producerIDExpiration is cfg's producer.id.expiration.ms with its default.
func (c Config) producerIDExpiration() time.Duration {
	if c.ProducerIDExpiration <= 0 {
		return DefaultProducerIDExpiration
	}
	return c.ProducerIDExpiration
}

// ProducerState describes one producer's state in the partition (for
// DescribeProducers and tests).
type ProducerState struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32 // -1 when no batch of this epoch is remembered
	LastTimestamp         int64
	CoordinatorEpoch      int32 // -1: none
	CurrentTxnStartOffset int64 // -1: no open transaction
}

// Producers returns the state of every producer the partition knows.
func (l *Log) Producers() []ProducerState {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	out := make([]ProducerState, 0, len(l.producers.entries))
	for id, e := range l.producers.entries {
		out = append(out, ProducerState{ProducerID: id, ProducerEpoch: e.epoch, LastSequence: e.lastSeq(),
			LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.currentTxnFirstOffset})
	}
	return out
}

// hasOngoingTxn: the producer has an open transaction in the partition at
// epoch (Kafka's hasOngoingTransaction(producerId, epoch)).
func (t *producerTable) hasOngoingTxn(producerID int64, epoch int16) bool {
	e, ok := t.entries[producerID]
	return ok && e.currentTxnFirstOffset != noOffset && e.epoch == epoch
}

// checkVerified rejects a transactional batch that would open a
// transaction while the producer's verification state says it must not:
// a verification was started but is not confirmed, was invalidated by a
// marker, or is for another epoch. Producers never verified (appends of
// internal writers, or verification disabled) are not checked. upd is the
// producer's state with the earlier batches of the same append.
func (t *producerTable) checkVerified(upd *producerEntry, h recordbatch.Header) error {
	if !h.Transactional() || (upd.currentTxnFirstOffset != noOffset && upd.epoch == h.ProducerEpoch) {
		return nil
	}
	v, ok := t.verifying[h.ProducerID]
	if !ok || (v.guard != 0 && v.verified && v.epoch == h.ProducerEpoch) {
		// A verified batch opens the transaction: later batches of the
		// same append see it ongoing.
		upd.currentTxnFirstOffset = 0
		return nil
	}
	return fmt.Errorf("%w: producer %d epoch %d", ErrTxnNotVerified, h.ProducerID, h.ProducerEpoch)
}

// StartTxnVerification begins the KIP-890 part 1 check of a transactional
// batch of (producerID, epoch): needed is false when the producer already
// has an ongoing transaction here at that epoch (no check, as Kafka).
// Otherwise guard identifies this verification; pass it to
// ConfirmTxnVerification once the coordinator has confirmed the partition
// is in the transaction. A marker for the producer in between invalidates
// it, and the append is then rejected with ErrTxnNotVerified.
func (l *Log) StartTxnVerification(producerID int64, epoch int16) (guard uint64, needed bool) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	t := &l.producers
	if t.hasOngoingTxn(producerID, epoch) {
		return 0, false
	}
	if v, ok := t.verifying[producerID]; ok && v.guard != 0 && v.epoch == epoch {
		return v.guard, true // a concurrent request's verification
	}
	if t.verifying == nil {
		t.verifying = map[int64]txnVerification{}
	}
	t.nextGuard++
	t.verifying[producerID] = txnVerification{epoch: epoch, guard: t.nextGuard, atMs: l.now().UnixMilli()}
	return t.nextGuard, true
}

// ConfirmTxnVerification records that the coordinator confirmed guard's
// verification. It reports false when a marker or a reload invalidated it
// meanwhile (the caller answers INVALID_TXN_STATE).
func (l *Log) ConfirmTxnVerification(producerID int64, guard uint64) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	v, ok := l.producers.verifying[producerID]
	if !ok || v.guard != guard || guard == 0 {
		return false
	}
	v.verified = true
	l.producers.verifying[producerID] = v
	return true
}

// touch records that the producers of hdrs appended at nowMs (wall clock).
func (t *producerTable) touch(hdrs []recordbatch.Header, nowMs int64) {
	for _, h := range hdrs {
		if e, ok := t.entries[h.ProducerID]; ok && h.ProducerID >= 0 {
			e.lastSeenMs = max(e.lastSeenMs, nowMs)
			t.entries[h.ProducerID] = e
		}
	}
}

// touchAll marks every producer seen at nowMs: after a load, expiry
// counts from the load, not from before the restart.
func (t *producerTable) touchAll(nowMs int64) {
	for id, e := range t.entries {
		e.lastSeenMs = max(e.lastSeenMs, nowMs)
		t.entries[id] = e
	}
}
