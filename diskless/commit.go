package diskless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Store is the slice of etcd the commit protocol needs (*metadata.Store).
type Store interface {
	DisklessHeads(ctx context.Context, parts []metadata.TierPartition) ([]metadata.DisklessHead, error)
	CommitDiskless(ctx context.Context, writes []metadata.DisklessWrite) (bool, error)
}

// MaxPartitionsPerTxn bounds the partitions of one commit transaction: each
// costs a compare and up to two puts, and etcd refuses transactions of more
// than 128 operations by default (--max-txn-ops).
const MaxPartitionsPerTxn = 40

// maxObjectBytes bounds a shared object a run may name (a reader holds it
// whole): MaxBytes plus one produce partition is far below it.
const maxObjectBytes = 256 << 20

// maxCommitAttempts bounds the lost races of one chunk before its batches
// fail with ErrCommit (the producer retries).
const maxCommitAttempts = 50

// Errors a produce can get from the appender; all retriable by the client.
var (
	// ErrObjectPut: the shared object could not be written
	// (KAFKA_STORAGE_ERROR).
	ErrObjectPut = errors.New("diskless: writing the shared object failed")
	// ErrCommit: the batches' coordinates could not be committed in etcd
	// (REQUEST_TIMED_OUT).
	ErrCommit = errors.New("diskless: committing the batches failed")
)

// Run is a run's value (doc.go, "etcd layout").
type Run struct {
	Object string `json:"object"`
	// Size is the object's size, so a reader GETs it whole without a HEAD.
	Size int64 `json:"size"`
	// Batches are [position, length, records, crc] in the object, in
	// offset order; crc is the batch header's CRC-32C, checked again
	// against the batch before it is served.
	Batches      [][4]int64 `json:"batches"`
	MaxTimestamp int64      `json:"maxTimestamp"`
	// CommittedMs is the committing broker's clock at the commit: the
	// merge leaves runs younger than its age alone.
	CommittedMs int64 `json:"committedMs"`
}

// bytes is the size of the run's batches.
func (r Run) bytes() int64 {
	var n int64
	for _, b := range r.Batches {
		n += b[1]
	}
	return n
}

// Records is how many offsets the run covers.
func (r Run) Records() int64 {
	var n int64
	for _, b := range r.Batches {
		n += b[2]
	}
	return n
}

func decodeRun(v []byte) (Run, error) {
	var r Run
	if err := json.Unmarshal(v, &r); err != nil {
		return Run{}, fmt.Errorf("%w: run: %v", metadata.ErrCorrupt, err)
	}
	if r.Object == "" || len(r.Batches) == 0 || r.Size <= 0 || r.Size > maxObjectBytes {
		return Run{}, fmt.Errorf("%w: run without object or batches", metadata.ErrCorrupt)
	}
	for _, b := range r.Batches {
		if b[0] < 0 || b[1] < recordbatch.HeaderSize || b[0]+b[1] > r.Size || b[2] <= 0 || b[2] > 1<<31 || b[3] < 0 || b[3] > 1<<32-1 {
			return Run{}, fmt.Errorf("%w: run batch %v", metadata.ErrCorrupt, b)
		}
	}
	return r, nil
}

// staged is one batch of a shared object, waiting for its commit.
type staged struct {
	part     metadata.TierPartition
	hdr      recordbatch.Header
	position int64
	length   int32
	crc      uint32
}

// commitObject commits the batches of one shared object (doc.go, "Commit
// protocol"), grouped by partition in object order, and returns one Outcome
// per batch in the order given. Chunks of MaxPartitionsPerTxn partitions
// commit independently; a chunk that cannot commit fails its batches with
// ErrCommit.
func commitObject(ctx context.Context, store Store, objectID string, objectSize int64, batches []staged, now func() time.Time) []Outcome {
	out := make([]Outcome, len(batches))
	groups := groupByPartition(batches)
	for start := 0; start < len(groups); start += MaxPartitionsPerTxn {
		chunk := groups[start:min(start+MaxPartitionsPerTxn, len(groups))]
		if err := commitChunk(ctx, store, objectID, objectSize, batches, chunk, out, now); err != nil {
			for _, g := range chunk {
				for _, i := range g.indexes {
					out[i] = Outcome{Err: fmt.Errorf("%w: %v", ErrCommit, err)}
				}
			}
		}
	}
	return out
}

// partitionGroup is the indexes (into the object's batches) of one
// partition's batches.
type partitionGroup struct {
	part    metadata.TierPartition
	indexes []int
}

func groupByPartition(batches []staged) []partitionGroup {
	var groups []partitionGroup
	at := map[metadata.TierPartition]int{}
	for i, b := range batches {
		g, ok := at[b.part]
		if !ok {
			g = len(groups)
			at[b.part] = g
			groups = append(groups, partitionGroup{part: b.part})
		}
		groups[g].indexes = append(groups[g].indexes, i)
	}
	return groups
}

// commitChunk decides and writes one chunk, re-reading the heads after a
// lost race, and fills out for its batches.
func commitChunk(ctx context.Context, store Store, objectID string, objectSize int64, batches []staged, chunk []partitionGroup, out []Outcome, now func() time.Time) error {
	parts := make([]metadata.TierPartition, len(chunk))
	for i, g := range chunk {
		parts[i] = g.part
	}
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		heads, err := store.DisklessHeads(ctx, parts)
		if err != nil {
			return err
		}
		writes, err := planChunk(objectID, objectSize, batches, chunk, heads, out, now().UnixMilli())
		if err != nil {
			return err
		}
		if len(writes) == 0 {
			return nil // only duplicates and refusals: nothing to write
		}
		ok, err := store.CommitDiskless(ctx, writes)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return errors.New("too many concurrent commits to the same partitions")
}

// planChunk runs Decide for each partition of the chunk against its head
// and returns the writes (heads and runs of the partitions that accepted a
// batch), filling out.
func planChunk(objectID string, objectSize int64, batches []staged, chunk []partitionGroup, heads []metadata.DisklessHead, out []Outcome, nowMs int64) ([]metadata.DisklessWrite, error) {
	var writes []metadata.DisklessWrite
	for gi, g := range chunk {
		head, err := decodeHead(heads[gi].Value)
		if err != nil {
			return nil, err
		}
		hdrs := make([]recordbatch.Header, len(g.indexes))
		for j, i := range g.indexes {
			hdrs[j] = batches[i].hdr
		}
		next, outcomes := Decide(head, hdrs, nowMs)
		run := Run{Object: objectID, Size: objectSize, MaxTimestamp: -1, CommittedMs: nowMs}
		runBase := int64(-1)
		for j, i := range g.indexes {
			out[i] = outcomes[j]
			if o := outcomes[j]; o.Err == nil && !o.Duplicate {
				if runBase < 0 {
					runBase = o.Base
				}
				b := batches[i]
				run.Batches = append(run.Batches, [4]int64{b.position, int64(b.length), o.Last - o.Base + 1, int64(b.crc)})
				run.MaxTimestamp = max(run.MaxTimestamp, b.hdr.MaxTimestamp)
			}
		}
		if runBase < 0 {
			continue
		}
		value, err := json.Marshal(run)
		if err != nil {
			return nil, err
		}
		writes = append(writes, metadata.DisklessWrite{Partition: g.part, Seen: heads[gi].Version,
			Head: next.encode(), RunBase: runBase, Run: value})
	}
	return writes, nil
}

// ErrOffsetOutOfRange: DeleteRecords past the log end.
var ErrOffsetOutOfRange = errors.New("diskless: offset out of range")

// HeadReader reads partitions' heads from etcd (*metadata.Store).
type HeadReader interface {
	DisklessHeads(ctx context.Context, parts []metadata.TierPartition) ([]metadata.DisklessHead, error)
}

// HeadStore is the slice of etcd RaiseStart needs (*metadata.Store).
type HeadStore interface {
	HeadReader
	PutDisklessHead(ctx context.Context, p metadata.TierPartition, seen int64, head []byte) (bool, error)
}

// EndsTimeout bounds CommittedEnds.
const EndsTimeout = 2 * time.Second

// CommittedEnds reads the log end (the next offset to assign) of each
// partition from its head in etcd, in the order given: what an Index
// follows, read at the source, for when the Index may lag behind (its
// watch resuming after the broker lost etcd). 0 for a partition never
// committed to. The read takes at most EndsTimeout: its callers answer a
// client waiting on it.
func CommittedEnds(ctx context.Context, store HeadReader, parts []metadata.TierPartition) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, EndsTimeout)
	defer cancel()
	ends := make([]int64, 0, len(parts))
	for start := 0; start < len(parts); start += MaxPartitionsPerTxn {
		heads, err := store.DisklessHeads(ctx, parts[start:min(start+MaxPartitionsPerTxn, len(parts))])
		if err != nil {
			return nil, err
		}
		for _, h := range heads {
			head, err := decodeHead(h.Value)
			if err != nil {
				return nil, err
			}
			ends = append(ends, head.Next)
		}
	}
	return ends, nil
}

// RaiseStart moves a partition's log start up to offset (DeleteRecords;
// -1: the log end), never down, with a compare-and-swap on its head, and
// returns the new start. The runs wholly below it stay until the merge or
// retention removes them; readers no longer see their records.
func RaiseStart(ctx context.Context, store HeadStore, tp metadata.TierPartition, offset int64) (int64, error) {
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		heads, err := store.DisklessHeads(ctx, []metadata.TierPartition{tp})
		if err != nil {
			return -1, err
		}
		head, err := decodeHead(heads[0].Value)
		if err != nil {
			return -1, err
		}
		if offset == -1 {
			offset = head.Next
		}
		if offset < 0 || offset > head.Next {
			return -1, fmt.Errorf("%w: %d outside [0, %d]", ErrOffsetOutOfRange, offset, head.Next)
		}
		if offset <= head.Start {
			return head.Start, nil
		}
		head.Start = offset
		ok, err := store.PutDisklessHead(ctx, tp, heads[0].Version, head.encode())
		if err != nil {
			return -1, err
		}
		if ok {
			return offset, nil
		}
	}
	return -1, fmt.Errorf("%w: too many concurrent commits", ErrCommit)
}
