package diskless

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// maxDecodeBytes bounds the decompressed size of one batch decoded for a
// timestamp look-up (as hotlog's).
const maxDecodeBytes = 256 << 20

// OffsetTime is a record's offset and timestamp.
type OffsetTime struct {
	Offset, Timestamp int64
}

// OffsetForTimestamp finds the first record at or after the log start whose
// timestamp is >= ts (ListOffsets with a timestamp): runs whose maximum is
// below ts are skipped without a GET; LogAppendTime batches count every
// record at the batch's maxTimestamp. ok is false if there is none.
func (r *Reader) OffsetForTimestamp(ctx context.Context, tp metadata.TierPartition, ts int64) (OffsetTime, bool, error) {
	start, _, _ := r.ix.Positions(tp)
	var found OffsetTime
	ok := false
	err := r.eachBatch(ctx, tp, start, func(run Run) bool { return run.MaxTimestamp >= ts },
		func(base int64, h recordbatch.Header, batch []byte) (bool, error) {
			if h.MaxTimestamp < ts {
				return true, nil
			}
			if h.LogAppendTime() {
				found, ok = OffsetTime{Offset: max(base, start), Timestamp: h.MaxTimestamp}, true
				return false, nil
			}
			records, err := recordbatch.DecodeRecords(batch, maxDecodeBytes)
			if err != nil {
				return false, err
			}
			for _, rec := range records {
				offset, rts := base+int64(rec.OffsetDelta), h.FirstTimestamp+rec.TimestampDelta64
				if offset >= start && rts >= ts {
					found, ok = OffsetTime{Offset: offset, Timestamp: rts}, true
					return false, nil
				}
			}
			return true, nil
		})
	return found, ok, err
}

// MaxTimestamp finds the record with the largest timestamp (ListOffsets
// -3); of equal timestamps the first wins.
func (r *Reader) MaxTimestamp(ctx context.Context, tp metadata.TierPartition) (OffsetTime, bool, error) {
	start, _, _ := r.ix.Positions(tp)
	best := int64(-1)
	for _, run := range r.ix.runsFrom(tp, start, 1<<30) {
		best = max(best, run.run.MaxTimestamp)
	}
	if best < 0 {
		return OffsetTime{}, false, nil
	}
	res, ok, err := r.OffsetForTimestamp(ctx, tp, best)
	return res, ok, err
}

// eachBatch calls fn for every batch of the partition from the run holding
// offset on, reading only the runs wanted accepts, until fn returns false
// or an error.
func (r *Reader) eachBatch(ctx context.Context, tp metadata.TierPartition, offset int64, wanted func(Run) bool,
	fn func(base int64, h recordbatch.Header, batch []byte) (bool, error),
) error {
	for _, run := range r.ix.runsFrom(tp, offset, 1<<30) {
		if !wanted(run.run) {
			continue
		}
		object, err := r.object(ctx, run.run)
		if err != nil {
			return err
		}
		base := run.base
		for _, b := range run.run.Batches {
			ref := BatchRef{TopicPartition: TopicPartition(tp), Position: b[0], Length: int32(b[1]), Records: int32(b[2]), CRC: uint32(b[3])}
			batch, err := ReadBatch(object, ref)
			if err != nil {
				return fmt.Errorf("object %s: %w", run.run.Object, err)
			}
			h, err := recordbatch.ParseHeader(batch)
			if err != nil {
				return err
			}
			more, err := fn(base, h, batch)
			if err != nil || !more {
				return err
			}
			base += b[2]
		}
	}
	return nil
}
