package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Log is one partition of a coordinator topic that this broker leads. The
// broker implements it on its partitions; tests use in-memory twins.
type Log interface {
	// Append appends one RecordBatch v2 as leader (the log assigns its
	// base offset) and returns the offset of its first record.
	Append(batch []byte) (baseOffset int64, err error)
	// WaitDurable blocks until the high watermark is above offset.
	WaitDurable(ctx context.Context, offset int64) error
	// Read returns whole batches starting at offset, below
	// HighWatermark, about maxBytes at most (at least one batch).
	Read(offset int64, maxBytes int) ([]byte, error)
	LogStartOffset() int64
	// HighWatermark bounds a replay: the offset after the last record to
	// load.
	HighWatermark() int64
}

var (
	// ErrNotLed is returned for a partition not (or no longer) led here.
	ErrNotLed = errors.New("coordinator: partition not led by this broker")
	// ErrNotAppended is returned by Wait for a batch whose append failed.
	ErrNotAppended = errors.New("coordinator: batch not appended")
	// ErrStalled is returned by Replay when a read held no whole batch
	// past the offset asked for (a corrupt log).
	ErrStalled = errors.New("coordinator: replay made no progress")
)

// PersistTimeout bounds the wait for an appended batch to become durable.
const PersistTimeout = 30 * time.Second

// replayReadBytes is the size of one read of a replay.
const replayReadBytes = 1 << 20

// Appended is a batch appended to a led partition and not yet known to be
// durable. A zero Log means the append did not happen.
type Appended struct {
	Log   Log
	Base  int64 // offset of the batch's first record
	Count int   // records in the batch, at least one
}

// Wait blocks until a's records are below the high watermark, at most
// PersistTimeout.
func (a Appended) Wait(ctx context.Context) error {
	if a.Log == nil {
		return ErrNotAppended
	}
	ctx, cancel := context.WithTimeout(ctx, PersistTimeout)
	defer cancel()
	return a.Log.WaitDurable(ctx, a.Base+int64(a.Count)-1)
}

// Batch is the records of one machine step for one partition.
type Batch[R any] struct {
	Partition int32
	Records   []R
}

// SplitByPartition groups records by partition: one Batch per partition in
// the order partitions first appear, records in machine order, so that
// each partition's log keeps the machine's order.
func SplitByPartition[R any](records []R, partitionOf func(R) int32) []Batch[R] {
	var batches []Batch[R]
	index := map[int32]int{}
	for _, r := range records {
		p := partitionOf(r)
		i, ok := index[p]
		if !ok {
			i = len(batches)
			index[p] = i
			batches = append(batches, Batch[R]{Partition: p})
		}
		batches[i].Records = append(batches[i].Records, r)
	}
	return batches
}

// Replay reads log from its start offset to the high watermark it has when
// called, about 1 MiB per read, and hands the whole batches of each read
// to apply, which returns the offset after the last of them. It stops at
// that end, at an empty read, or at the first error, and returns the
// offset reached. A read that apply makes no progress on is ErrStalled, so
// a corrupt log cannot loop forever.
func Replay(log Log, apply func(batches []byte) (next int64, err error)) (offset int64, err error) {
	offset, end := log.LogStartOffset(), log.HighWatermark()
	for offset < end {
		data, err := log.Read(offset, replayReadBytes)
		if err != nil {
			return offset, err
		}
		if len(data) == 0 {
			return offset, nil
		}
		next, err := apply(data)
		if err != nil {
			return offset, err
		}
		if next <= offset {
			return offset, fmt.Errorf("%w: at offset %d", ErrStalled, offset)
		}
		offset = next
	}
	return offset, nil
}
