package compaction

import (
	"fmt"

	"github.com/strata-log/strata/hotlog"
)

// DefaultMaxDecompressed is Policy.MaxDecompressed's default: the largest
// decompressed record section of one batch the cleaner accepts, in bytes.
const DefaultMaxDecompressed = 128 << 20

// Policy is what a Rewriter needs to decide which records survive (doc.go,
// "Rules").
type Policy struct {
	// Map is the offset map BuildMap filled over [checkpoint, MapEnd). Nil
	// acts as an empty map: then only the tombstone, abort and keyless rules
	// drop records.
	Map *OffsetMap
	// MapEnd is BuildMap's result. Records at or above it are always kept,
	// and so are control batches at or above it.
	MapEnd int64
	// NowMs is the cleaner's wall clock, Unix milliseconds.
	NowMs int64
	// DeleteRetentionMs is the topic's delete.retention.ms (>= 0): tombstones
	// and markers in batches with MaxTimestamp < NowMs-DeleteRetentionMs may go.
	DeleteRetentionMs int64
	// Aborted lists every aborted transaction overlapping the rewritten range:
	// the txnindex entries of the rewritten segments and of later ones (an
	// abort's marker, which names the segment holding the entry, may lie above
	// the range while its data lies inside).
	Aborted []hotlog.AbortedTxn
	// MaxDecompressed bounds one batch's decompressed records, in bytes.
	// 0 means DefaultMaxDecompressed.
	MaxDecompressed int
	// FromLogStart says the rewritten range starts at the partition's log
	// start offset, so no transaction's data lies before it and a producer's
	// first marker in the range may be dropped. False is always safe (such
	// markers are kept).
	FromLogStart bool
	// LastDataOffsets is for callers that cannot make the Plan pass: producer
	// id -> last offset of that producer's last data batch in the whole log
	// (hotlog's producer state or an object's producer snapshot). Only the
	// batch ending there is kept when emptied. Ignored once Plan was called.
	LastDataOffsets map[int64]int64
}

// Validate checks the policy's fields.
func (p Policy) Validate() error {
	switch {
	case p.MapEnd < 0:
		return fmt.Errorf("%w: MapEnd %d < 0", ErrBadPolicy, p.MapEnd)
	case p.DeleteRetentionMs < 0:
		return fmt.Errorf("%w: DeleteRetentionMs %d < 0", ErrBadPolicy, p.DeleteRetentionMs)
	case p.MaxDecompressed < 0:
		return fmt.Errorf("%w: MaxDecompressed %d < 0", ErrBadPolicy, p.MaxDecompressed)
	}
	for _, a := range p.Aborted {
		if a.FirstOffset > a.LastOffset {
			return fmt.Errorf("%w: aborted txn of producer %d from %d to %d", ErrBadPolicy, a.ProducerID, a.FirstOffset, a.LastOffset)
		}
	}
	return nil
}

// withDefaults fills zero fields.
func (p Policy) withDefaults() Policy {
	if p.MaxDecompressed <= 0 {
		p.MaxDecompressed = DefaultMaxDecompressed
	}
	if p.Map == nil {
		p.Map = NewOffsetMap(0)
	}
	return p
}

// deleteHorizon is the timestamp below which a batch's tombstones and markers
// may be dropped. Saturates instead of overflowing.
func (p Policy) deleteHorizon() int64 {
	retention := max(p.DeleteRetentionMs, 0)
	if p.NowMs < 0 && retention > p.NowMs-minInt64 {
		return minInt64
	}
	return p.NowMs - retention
}

const minInt64 = -1 << 63

// Stats counts one Rewriter's work. Records dropped are split by reason.
type Stats struct {
	BatchesIn, BatchesOut int64
	RecordsIn, RecordsOut int64
	BytesIn, BytesOut     int64

	SupersededDropped int64 // records with a newer offset for their key
	TombstonesDropped int64 // null-value records past the delete horizon
	AbortedDropped    int64 // records of aborted transactions
	KeylessDropped    int64 // records without a key
	MarkersDropped    int64 // control batches dropped
	EmptyBatchesKept  int64 // batches kept with no records (last of their producer)

	// TombstonesKept counts tombstones kept because they were not past the
	// delete horizon yet, and KeptTombstoneMaxTimestamp is the largest
	// MaxTimestamp of their batches (0 when none): a pass after
	// KeptTombstoneMaxTimestamp + delete.retention.ms can drop them all, even
	// with no new dirty data (the caller schedules it).
	TombstonesKept            int64
	KeptTombstoneMaxTimestamp int64
}
