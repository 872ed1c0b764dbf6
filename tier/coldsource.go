package tier

// The cold source: offsets below a partition's local log start are served
// from the bucket through the broker's one ColdReader. It reads only
// objects named by the manifest and never opens a hot segment file, so a
// catch-up reader cannot evict the hot tail's pages. Every method takes
// the partition's manifest key and its hot log, which answers for offsets
// the bucket does not (or no longer) hold.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// ColdSource reads a partition's history from the bucket. The zero
// Reader (no bucket) finds nothing cold.
type ColdSource struct {
	Reader   *ColdReader
	Manifest *Manifest
}

// maxColdHops bounds how many manifest entries one cold read walks past
// when an object holds nothing at or after the offset (compaction gaps).
const maxColdHops = 4

// objectGoneBackoff is the pause before a cold read looks an offset up
// again after finding its object deleted (the manifest's watch may lag
// the swap that replaced it by a moment).
const objectGoneBackoff = 50 * time.Millisecond

// Read reads from the manifest entry holding offset (or the first one
// above it). Errors other than out-of-range and cancellation wrap
// hotlog.ErrStorage, which the broker answers KAFKA_STORAGE_ERROR: the
// client retries, and damaged bytes are never served.
//
// bufs is ColdRead.Buffers: when not nil it owns the answer read from the
// bucket (an answer from the hot log is the caller's).
func (s ColdSource) Read(ctx context.Context, k metadata.TierPartition, log *hotlog.Log, offset int64, maxBytes int, upTo int64, bufs *bufpool.Set) ([]byte, error) {
	return s.read(ctx, k, log, ColdRead{Offset: offset, MaxBytes: maxBytes, UpTo: upTo, Buffers: bufs})
}

// ReadCached is Read answered from the cold cache alone, without waiting
// on the bucket: false when any byte it needs is not cached (or the read
// fails), and then it has started no GET for it.
func (s ColdSource) ReadCached(k metadata.TierPartition, log *hotlog.Log, offset int64, maxBytes int, upTo int64, bufs *bufpool.Set) ([]byte, bool) {
	data, err := s.read(context.Background(), k, log, ColdRead{Offset: offset, MaxBytes: maxBytes, UpTo: upTo, CacheOnly: true, Buffers: bufs})
	return data, err == nil
}

// read is Read for r's Offset, MaxBytes, UpTo and CacheOnly; the manifest
// supplies the objects.
func (s ColdSource) read(ctx context.Context, k metadata.TierPartition, log *hotlog.Log, r ColdRead) ([]byte, error) {
	offset, maxBytes, upTo := r.Offset, r.MaxBytes, r.UpTo
	m := s.Manifest
	for hop := 0; hop < maxColdHops; hop++ {
		e, ok := m.Find(k.TopicID, k.Partition, offset)
		if !ok || e.BaseOffset >= log.LogStartOffset() {
			// Not tiered (or already local again): the hot log answers,
			// out of range if the offset is gone.
			return log.Read(max(offset, log.LogStartOffset()), maxBytes, upTo)
		}
		req := ColdRead{Object: ColdObjectOf(e), Offset: offset, MaxBytes: maxBytes, UpTo: upTo, CacheOnly: r.CacheOnly, Buffers: r.Buffers}
		if next, ok := m.Find(k.TopicID, k.Partition, e.LastOffset+1); ok {
			obj := ColdObjectOf(next)
			req.Next = &obj
		}
		data, err := s.Reader.Read(ctx, req)
		if errors.Is(err, ErrObjectGone) && !r.CacheOnly {
			// Tiered cleaning replaced the object (or retention dropped
			// it) after the lookup: look the offset up again.
			if err := sleepCtx(ctx, objectGoneBackoff); err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, ErrNotCached) {
			return nil, err
		}
		if err != nil {
			return nil, coldError(err)
		}
		if len(data) > 0 || e.LastOffset+1 >= upTo {
			return data, nil
		}
		offset = e.LastOffset + 1 // nothing left in this object: try the next
	}
	return []byte{}, nil
}

// maxAbortedHops bounds how many objects after the one read a
// read_committed cold read consults for abort markers (indexes are cached;
// each costs at most one ranged GET). An abort whose marker lies further
// on is missed: its records would be delivered as committed. Kafka walks
// every later segment; transactions span minutes, objects far more.
const maxAbortedHops = 8

// AbortedFor lists the aborted transactions overlapping the batches of
// data, a cold read from offset: from the objects' aborted-transaction
// sections and then the local log.
func (s ColdSource) AbortedFor(ctx context.Context, k metadata.TierPartition, log *hotlog.Log, offset int64, data []byte) ([]hotlog.AbortedTxn, error) {
	end := offset
	for rest := data; len(rest) > 0; {
		h, err := recordbatch.ParseHeader(rest)
		if err != nil {
			break
		}
		end, rest = max(end, h.LastOffset()+1), rest[h.Size():]
	}
	return s.aborted(ctx, k, log, offset, end)
}

// aborted collects the aborts overlapping [from, to): the sections of the
// tiered objects from the one holding from on (stopping, as Kafka, at an
// entry whose last stable offset reaches to), then the local log's aborts
// whose marker lies after the last object consulted.
func (s ColdSource) aborted(ctx context.Context, k metadata.TierPartition, log *hotlog.Log, from, to int64) ([]hotlog.AbortedTxn, error) {
	m := s.Manifest
	var out []hotlog.AbortedTxn
	covered := from // aborts with a marker below covered were collected
	e, ok := m.Find(k.TopicID, k.Partition, from)
	for hop := 0; ok && hop < maxAbortedHops && e.BaseOffset < log.LogStartOffset(); hop++ {
		x, err := s.Reader.Index(ctx, ColdObjectOf(e))
		if errors.Is(err, ErrObjectGone) {
			if err := sleepCtx(ctx, objectGoneBackoff); err != nil {
				return nil, err
			}
			e, ok = m.Find(k.TopicID, k.Partition, covered)
			continue
		}
		if err != nil {
			return nil, coldError(err)
		}
		got, complete := hotlog.CollectAbortedTxns(x.Aborted, from, to)
		out = append(out, got...)
		if complete {
			return out, nil
		}
		covered = e.LastOffset + 1
		e, ok = m.Find(k.TopicID, k.Partition, covered)
	}
	for _, a := range log.AbortedTxns(from, to) {
		if a.LastOffset >= covered {
			out = append(out, a)
		}
	}
	return out, nil
}

// ColdObjectOf names the object of a manifest entry for the cold reader.
func ColdObjectOf(e metadata.TierEntry) ColdObject {
	return ColdObject{Key: e.Key, Size: e.Size}
}

// coldError maps a cold-reader failure: cancellation stays itself,
// anything else is a storage error.
func coldError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: cold read: %w", hotlog.ErrStorage, err)
}

func coldErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return coldError(err)
}

// coldEntries are the partition's manifest entries that start below the
// local log start: the part of the log only (or also) in the bucket that
// the hot log cannot answer for.
func (s ColdSource) coldEntries(k metadata.TierPartition, localStart int64) []metadata.TierEntry {
	entries := s.Manifest.Segments(k.TopicID, k.Partition)
	n := 0
	for n < len(entries) && entries[n].BaseOffset < localStart {
		n++
	}
	return entries[:n]
}

// OffsetForTimestamp finds the first record with timestamp >= ts at or
// after from in the objects below localStart; ok is false if none has
// one (the hot log is searched next).
func (s ColdSource) OffsetForTimestamp(ctx context.Context, k metadata.TierPartition, localStart, ts, from int64) (OffsetTime, bool, error) {
	if s.Reader == nil {
		return OffsetTime{}, false, nil
	}
	for _, e := range s.coldEntries(k, localStart) {
		if e.MaxTimestamp < ts || e.LastOffset < from {
			continue
		}
		res, ok, err := s.Reader.OffsetForTimestamp(ctx, ColdObjectOf(e), ts, max(from, e.BaseOffset))
		if err != nil || ok {
			return res, ok, coldErrorOrNil(err)
		}
	}
	return OffsetTime{}, false, nil
}

// MaxTimestamp returns the tiered record with the largest timestamp among
// objects below localStart (the earliest on ties).
func (s ColdSource) MaxTimestamp(ctx context.Context, k metadata.TierPartition, localStart int64) (OffsetTime, bool, error) {
	if s.Reader == nil {
		return OffsetTime{}, false, nil
	}
	var best *metadata.TierEntry
	entries := s.coldEntries(k, localStart)
	for i := range entries {
		if best == nil || entries[i].MaxTimestamp > best.MaxTimestamp {
			best = &entries[i]
		}
	}
	if best == nil {
		return OffsetTime{}, false, nil
	}
	x, err := s.Reader.Index(ctx, ColdObjectOf(*best))
	if err != nil {
		return OffsetTime{}, false, coldError(err)
	}
	return OffsetTime{Offset: x.Footer.MaxTimestampOffset, Timestamp: x.Footer.MaxTimestamp}, true, nil
}

// EpochEndOffset answers OffsetForLeaderEpoch for an epoch that ended in
// the bucket. ok is false when the answer is the hot log's: the requested
// epoch is at least the last tiered one (epochs grow with offsets, so the
// hot log knows every later epoch), or nothing is tiered below localStart.
//
// Otherwise the answer lies in the first object whose last epoch
// (TierEntry.LeaderEpoch) is above the requested one: its epoch ranges give
// the largest epoch <= requested and the start of the next one. When all
// of its epochs are above, the previous object's last epoch ends at this
// object's base offset (Kafka's floor/higher-entry rule, KIP-279).
func (s ColdSource) EpochEndOffset(ctx context.Context, k metadata.TierPartition, localStart int64, requested int32) (int32, int64, bool, error) {
	if s.Reader == nil {
		return 0, 0, false, nil
	}
	entries := s.coldEntries(k, localStart)
	if len(entries) == 0 {
		return 0, 0, false, nil
	}
	j := 0
	for j < len(entries) && entries[j].LeaderEpoch <= requested {
		j++
	}
	if j == len(entries) {
		return 0, 0, false, nil
	}
	x, err := s.Reader.Index(ctx, ColdObjectOf(entries[j]))
	if err != nil {
		return 0, 0, false, coldError(err)
	}
	for i := len(x.Epochs) - 1; i >= 0; i-- {
		if x.Epochs[i].Epoch <= requested && i+1 < len(x.Epochs) {
			return x.Epochs[i].Epoch, x.Epochs[i+1].StartOffset, true, nil
		}
	}
	if j > 0 {
		return entries[j-1].LeaderEpoch, entries[j].BaseOffset, true, nil
	}
	return requested, entries[0].BaseOffset, true, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// SnapshotReadTimeout bounds the bucket read of a producer snapshot
// (ProducerSnapshot); on timeout a log restart goes ahead with empty state
// rather than stall a follower or a leader election.
const SnapshotReadTimeout = 10 * time.Second

// ErrNoProducerSnapshot: no tiered producer state at the offset asked.
var ErrNoProducerSnapshot = errors.New("tier: no tiered producer snapshot at the reset offset")

// ProducerSnapshot returns the producer state as of offset from the
// producer-snapshot section of k's tiered object whose end (LastOffset+1)
// is exactly offset, read through the cold reader within
// SnapshotReadTimeout (its index read includes the section, checked by
// DecodeIndexSections). Errors wrap ErrNoProducerSnapshot or say why the
// read failed. Why only an exact end will do: replication/follower/restart.go.
func (s ColdSource) ProducerSnapshot(ctx context.Context, k metadata.TierPartition, offset int64) ([]byte, error) {
	if s.Reader == nil {
		return nil, fmt.Errorf("%w: tiering is off", ErrNoProducerSnapshot)
	}
	e, ok := s.Manifest.Find(k.TopicID, k.Partition, offset-1)
	if !ok || e.LastOffset+1 != offset {
		return nil, fmt.Errorf("%w: no manifest entry ends at %d", ErrNoProducerSnapshot, offset)
	}
	ctx, cancel := context.WithTimeout(ctx, SnapshotReadTimeout)
	defer cancel()
	x, err := s.Reader.Index(ctx, ColdObjectOf(e))
	if err != nil {
		return nil, fmt.Errorf("reading the index of %s: %w", e.Key, err)
	}
	if at, ok := x.ProducerSnapshotOffset(); !ok || at != offset {
		return nil, fmt.Errorf("%w: object %s carries none", ErrNoProducerSnapshot, e.Key)
	}
	return x.ProducerSnapshot, nil
}
