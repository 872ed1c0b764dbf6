package compaction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// In-memory twins of the cleaner's collaborators. The hot log itself is a
// real hotlog.Log in a temporary directory: the cleaned-segment swap is
// what the local pass drives, and hotlog's own tests cover it.

// twinPartition is a local replica whose HW and LSO are its log end.
type twinPartition struct {
	topic      string
	id         metadata.TopicID
	index      int32
	log        *hotlog.Log
	cfg        metadata.TopicConfig
	leader     bool
	tiered     bool
	keepsLocal bool
	tierEnd    int64 // TierCleanEnd when set, else unbounded
	state      PartitionState
}

var _ Partition = (*twinPartition)(nil)

func (p *twinPartition) Topic() string                { return p.topic }
func (p *twinPartition) TopicID() metadata.TopicID    { return p.id }
func (p *twinPartition) Index() int32                 { return p.index }
func (p *twinPartition) Log() Log                     { return p.log }
func (p *twinPartition) Config() metadata.TopicConfig { return p.cfg }
func (p *twinPartition) HighWatermark() int64         { return p.log.LogEndOffset() }
func (p *twinPartition) LastStableOffset() int64      { return p.log.LogEndOffset() }
func (p *twinPartition) IsLeader() bool               { return p.leader }
func (p *twinPartition) LeaderEpoch() int32           { return 1 }
func (p *twinPartition) Tiered() bool                 { return p.tiered }
func (p *twinPartition) KeepsLocalLog() bool          { return p.keepsLocal }
func (p *twinPartition) TierCleanEnd() int64 {
	if p.tierEnd != 0 {
		return p.tierEnd
	}
	return math.MaxInt64 // the twin's bucket holds only committed offsets
}
func (p *twinPartition) State() *PartitionState { return &p.state }

// twinPartitions lists a fixed set of replicas.
type twinPartitions []*twinPartition

func (ps twinPartitions) Local() []Partition {
	out := make([]Partition, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// compactConfig is a compacted topic's config that cleans at any dirt.
func compactConfig() metadata.TopicConfig {
	return metadata.TopicConfig{CleanupPolicy: "compact", MinCleanableDirtyRatio: 0.01, SegmentBytes: 4096}
}

// newTwinPartition opens a log of 4 KiB segments for a compacted topic.
func newTwinPartition(t *testing.T, topic string) *twinPartition {
	t.Helper()
	l, err := hotlog.Open(hotlog.Config{Dir: t.TempDir(), SegmentBytes: 4096, Durability: hotlog.DurabilityReplication})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &twinPartition{topic: topic, id: metadata.TopicID{1}, log: l, cfg: compactConfig(), leader: true}
}

// appendVersions appends rounds of one record per key (values name the
// round), then unique filler until every keyed record is sealed, and
// returns the offset of each key's last version.
func appendVersions(t *testing.T, l *hotlog.Log, keys, rounds int) map[string]int64 {
	t.Helper()
	latest := map[string]int64{}
	for r := range rounds {
		var kv []string
		for k := range keys {
			kv = append(kv, fmt.Sprintf("key-%02d", k), fmt.Sprintf("round-%03d", r))
		}
		res, err := l.Append(buildBatch(t, testBatch{records: keyed(kv...)}), 1)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys {
			latest[fmt.Sprintf("key-%02d", k)] = res.BaseOffset + int64(k)
		}
	}
	keyedEnd := l.LogEndOffset()
	for i := 0; sealedEnd(l) < keyedEnd; i++ {
		if _, err := l.Append(buildBatch(t, testBatch{records: keyed(fmt.Sprintf("fill-%04d", i), "filler")}), 1); err != nil {
			t.Fatal(err)
		}
	}
	return latest
}

// sealedEnd is one past the last offset of l's sealed segments.
func sealedEnd(l *hotlog.Log) int64 {
	segs := l.SealedSegments()
	if len(segs) == 0 {
		return 0
	}
	return segs[len(segs)-1].RangeEnd
}

// sealedRecords decodes every record of l's sealed segments.
func sealedRecords(t *testing.T, l *hotlog.Log) []liveRecord {
	t.Helper()
	var all []byte
	for _, s := range l.SealedSegments() {
		f, size, err := l.OpenSealedSegment(s.BaseOffset)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, size)
		if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		f.Close()
		all = append(all, data...)
	}
	_, live := decodeLog(t, all)
	return live
}

// twinManifest is the bucket's manifest: one partition's entries.
type twinManifest struct {
	mu      sync.Mutex
	entries []metadata.TierEntry
}

var _ Manifest = (*twinManifest)(nil)

func (m *twinManifest) Segments(metadata.TopicID, int32) []metadata.TierEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]metadata.TierEntry(nil), m.entries...)
}

func (m *twinManifest) ContiguousEnd(id metadata.TopicID, part int32) (int64, bool) {
	entries := m.Segments(id, part)
	if len(entries) == 0 {
		return 0, false
	}
	end := entries[0].BaseOffset
	for _, e := range entries {
		if e.BaseOffset > end {
			break
		}
		end = e.LastOffset + 1
	}
	return end, true
}

func (m *twinManifest) Range(id metadata.TopicID, part int32) (int64, int64, bool) {
	entries := m.Segments(id, part)
	if len(entries) == 0 {
		return 0, 0, false
	}
	return entries[0].BaseOffset, entries[len(entries)-1].LastOffset + 1, true
}

// twinTier is a bucket in memory: each object is its concatenated batches.
// Compact runs the rewrite and swaps the run for one object, as
// tier.Compactor does with a target size above the run's bytes.
type twinTier struct {
	manifest *twinManifest
	mu       sync.Mutex
	objects  map[string][]byte
	swaps    int
	next     int
	deletes  int
}

var _ TierStore = (*twinTier)(nil)

func newTwinTier() *twinTier {
	return &twinTier{manifest: &twinManifest{}, objects: map[string][]byte{}}
}

// upload stores batches as one object and appends its manifest entry.
func (b *twinTier) upload(t *testing.T, batches []byte) {
	t.Helper()
	e := b.put(batches, batchHeaders(batches))
	b.manifest.mu.Lock()
	b.manifest.entries = append(b.manifest.entries, e)
	b.manifest.mu.Unlock()
}

func (b *twinTier) put(batches []byte, headers []recordbatch.Header) metadata.TierEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	key := fmt.Sprintf("obj-%04d", b.next)
	b.objects[key] = batches
	first, last := headers[0], headers[len(headers)-1]
	return metadata.TierEntry{BaseOffset: first.BaseOffset, LastOffset: last.BaseOffset + int64(last.LastOffsetDelta),
		Key: key, Size: int64(len(batches)), MaxTimestamp: last.MaxTimestamp}
}

func (b *twinTier) Compact(_ context.Context, run tier.CompactRun) (tier.CompactResult, error) {
	var out []byte
	err := run.Rewrite(b.ObjectBatches(context.Background(), run.Entries), func(batch []byte) error {
		out = append(out, batch...)
		return nil
	})
	if err != nil {
		return tier.CompactResult{}, err
	}
	if len(out) == 0 {
		return tier.CompactResult{}, tier.ErrCompactedEmpty
	}
	e := b.put(out, batchHeaders(out))
	e.BaseOffset = run.Entries[0].BaseOffset // the new object covers the run's range
	b.manifest.mu.Lock()
	defer b.manifest.mu.Unlock()
	var kept []metadata.TierEntry
	for _, old := range b.manifest.entries {
		if old.BaseOffset < run.Entries[0].BaseOffset || old.BaseOffset > run.Entries[len(run.Entries)-1].BaseOffset {
			kept = append(kept, old)
		}
	}
	kept = append(kept, e)
	sort.Slice(kept, func(i, j int) bool { return kept[i].BaseOffset < kept[j].BaseOffset })
	b.manifest.entries = kept
	b.swaps++
	return tier.CompactResult{Olds: run.Entries, News: []metadata.TierEntry{e}}, nil
}

func (b *twinTier) ObjectBatches(_ context.Context, entries []metadata.TierEntry) ObjectBatches {
	var all []byte
	b.mu.Lock()
	for _, e := range entries {
		all = append(all, b.objects[e.Key]...)
	}
	b.mu.Unlock()
	return closer{NewSliceSource(all)}
}

func (b *twinTier) AbortedTxns(context.Context, metadata.TierEntry) ([]hotlog.AbortedTxn, error) {
	return nil, nil
}

func (b *twinTier) DeleteReplaced(context.Context) {
	b.mu.Lock()
	b.deletes++
	b.mu.Unlock()
}

func (b *twinTier) deleteRounds() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deletes
}

// bucketRecords decodes every record the manifest names, in order.
func (b *twinTier) bucketRecords(t *testing.T) []liveRecord {
	t.Helper()
	src := b.ObjectBatches(context.Background(), b.manifest.Segments(metadata.TopicID{}, 0))
	var all []byte
	for {
		batch, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
	}
	_, live := decodeLog(t, all)
	return live
}

// batchHeaders parses the headers of well-formed batches.
func batchHeaders(batches []byte) []recordbatch.Header {
	var out []recordbatch.Header
	for src := NewSliceSource(batches); ; {
		b, err := src.Next()
		if err != nil {
			return out
		}
		h, err := recordbatch.ValidateStored(b)
		if err != nil {
			return out
		}
		out = append(out, h)
	}
}

type closer struct{ tier.BatchSource }

func (closer) Close() {}

// spoolDir is a directory for the tiered pass's spool files that must be
// empty again after the test.
func spoolDir(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%d spool files left behind", len(left))
		}
	})
	return dir
}
