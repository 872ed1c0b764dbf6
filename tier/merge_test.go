package tier

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier/objstore"
)

// mergeNow is the planning clock of the tests; old entries' records are
// an hour older.
var mergeNow = time.UnixMilli(1_700_000_000_000)

// mergeEntries builds a contiguous run of entries of the given object
// sizes, 10 offsets and one minute of records each, ending an hour before
// mergeNow.
func mergeEntries(sizes ...int64) []metadata.TierEntry {
	var out []metadata.TierEntry
	ts := mergeNow.Add(-time.Hour).UnixMilli() - int64(len(sizes))*60_000
	for i, size := range sizes {
		base := int64(i) * 10
		out = append(out, metadata.TierEntry{TopicID: testTopicID, Partition: 3, BaseOffset: base, LastOffset: base + 9,
			FirstTimestamp: ts, MaxTimestamp: ts + 60_000, Key: fmt.Sprintf("k%d", i), Size: size, Version: int64(i + 1)})
		ts += 60_000
	}
	return out
}

func repeatSize(size int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func TestPlanMerges(t *testing.T) {
	young := func(i ...int) func([]metadata.TierEntry) {
		return func(es []metadata.TierEntry) {
			for _, j := range i {
				es[j].MaxTimestamp = mergeNow.Add(-time.Minute).UnixMilli()
			}
		}
	}
	gapAfter := func(i int) func([]metadata.TierEntry) {
		return func(es []metadata.TierEntry) {
			for j := i + 1; j < len(es); j++ {
				es[j].BaseOffset += 5
				es[j].LastOffset += 5
			}
		}
	}
	spread := func(es []metadata.TierEntry) { // one day of records per entry
		for i := range es {
			es[i].FirstTimestamp = mergeNow.Add(-time.Duration(len(es)-i+1) * 24 * time.Hour).UnixMilli()
			es[i].MaxTimestamp = es[i].FirstTimestamp + 24*time.Hour.Milliseconds() - 1
		}
	}
	tests := []struct {
		name   string
		sizes  []int64
		change func([]metadata.TierEntry)
		policy func(*MergePolicy)
		want   [][2]int // [first, last] entry indexes of each run
		reason []string
	}{
		{name: "small objects become one", sizes: repeatSize(10, 8),
			want: [][2]int{{0, 7}}, reason: []string{mergeHalves}},
		{name: "nothing to merge alone", sizes: []int64{10}},
		{name: "no target plans nothing", sizes: repeatSize(10, 8), policy: func(p *MergePolicy) { p.TargetBytes = 0 }},
		{name: "grace: young tail waits", sizes: repeatSize(10, 6), change: young(4, 5),
			want: [][2]int{{0, 3}}},
		{name: "grace: a young object splits runs", sizes: repeatSize(10, 7), change: young(3),
			want: [][2]int{{0, 2}, {4, 6}}},
		{name: "grace is measured on MaxTimestamp", sizes: repeatSize(10, 4),
			policy: func(p *MergePolicy) { p.Grace = 2 * time.Hour }},
		{name: "a gap in offsets splits runs", sizes: repeatSize(10, 6), change: gapAfter(2),
			want: [][2]int{{0, 2}, {3, 5}}},
		{name: "a kept boundary splits runs", sizes: repeatSize(10, 6), policy: func(p *MergePolicy) { p.Keep = []int64{30} },
			want: [][2]int{{0, 2}, {3, 5}}},
		{name: "only below the limit", sizes: repeatSize(10, 6), policy: func(p *MergePolicy) { p.Below = 35 },
			want: [][2]int{{0, 2}}},
		{name: "full objects are left alone", sizes: []int64{90, 10, 10, 84, 10, 95},
			want: [][2]int{{1, 2}}},
		{name: "a dominant object waits for its match", sizes: []int64{40, 5, 5, 5},
			want: [][2]int{{1, 3}}},
		{name: "a dominant object merges once matched", sizes: append([]int64{40}, repeatSize(5, 8)...),
			want: [][2]int{{0, 8}}, reason: []string{mergeHalves}},
		{name: "uneven neighbours that fill an object", sizes: []int64{50, 20, 15},
			want: [][2]int{{0, 2}}, reason: []string{mergeFills}},
		{name: "uneven neighbours that neither halve nor fill", sizes: []int64{50, 20}},
		{name: "run bounded by the target bytes", sizes: repeatSize(30, 10),
			want: [][2]int{{0, 2}, {3, 5}, {6, 8}}, reason: []string{mergeFills, mergeFills, mergeFills}},
		{name: "run bounded by MaxRunObjects", sizes: repeatSize(1, 40), policy: func(p *MergePolicy) { p.TargetBytes = 1000 },
			want: [][2]int{{0, 31}, {32, 39}}},
		{name: "run bounded by segment.ms", sizes: repeatSize(10, 6), change: spread,
			policy: func(p *MergePolicy) { p.MaxSpanMs = 3 * 24 * time.Hour.Milliseconds() },
			want:   [][2]int{{0, 2}, {3, 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries := mergeEntries(tc.sizes...)
			if tc.change != nil {
				tc.change(entries)
			}
			pol := MergePolicy{TargetBytes: 100, Now: mergeNow, Grace: 10 * time.Minute, Below: math.MaxInt64}
			if tc.policy != nil {
				tc.policy(&pol)
			}
			runs := PlanMerges(entries, pol)
			var got [][2]int
			for _, r := range runs {
				first := slices.IndexFunc(entries, func(e metadata.TierEntry) bool { return e.Key == r.Entries[0].Key })
				got = append(got, [2]int{first, first + len(r.Entries) - 1})
				var bytes int64
				for _, e := range r.Entries {
					bytes += e.Size
				}
				if bytes != r.Bytes || bytes > pol.TargetBytes {
					t.Errorf("run %v: %d bytes, reported %d, target %d", r, bytes, r.Bytes, pol.TargetBytes)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("runs %v, want %v (%v)", got, tc.want, runs)
			}
			for i, reason := range tc.reason {
				if runs[i].Reason != reason {
					t.Errorf("run %v: reason %q, want %q", runs[i], runs[i].Reason, reason)
				}
			}
		})
	}
}

// mergeSim is a partition's bucket under a trickle of uploads and a merge
// pass after each: entries and the bytes the merges rewrote.
type mergeSim struct {
	entries   []metadata.TierEntry
	appended  int64
	rewritten int64
	version   int64
}

func (s *mergeSim) upload(size int64) {
	base := int64(0)
	if n := len(s.entries); n > 0 {
		base = s.entries[n-1].LastOffset + 1
	}
	s.version++
	s.entries = append(s.entries, metadata.TierEntry{BaseOffset: base, LastOffset: base + 9, Size: size,
		FirstTimestamp: 1, MaxTimestamp: 1, Key: fmt.Sprint("u", s.version), Version: s.version})
	s.appended += size
}

// pass applies one plan, as the broker does (each run becomes one object
// of the run's bytes), and reports how many runs it merged.
func (s *mergeSim) pass(t *testing.T, pol MergePolicy) int {
	runs := PlanMerges(s.entries, pol)
	for i := len(runs) - 1; i >= 0; i-- { // from the end: earlier indexes stay valid
		r := runs[i]
		at := slices.IndexFunc(s.entries, func(e metadata.TierEntry) bool { return e.Key == r.Entries[0].Key })
		if at < 0 || len(r.Entries) < 2 {
			t.Fatalf("run %v not in the manifest or too short", r)
		}
		s.version++
		merged := metadata.TierEntry{BaseOffset: r.Entries[0].BaseOffset, LastOffset: r.Entries[len(r.Entries)-1].LastOffset,
			Size: r.Bytes, FirstTimestamp: 1, MaxTimestamp: 1, Key: fmt.Sprint("m", s.version), Version: s.version}
		s.entries = slices.Replace(s.entries, at, at+len(r.Entries), merged)
		s.rewritten += r.Bytes
	}
	return len(runs)
}

// TestPlanMergesTrickle: a partition uploads equal small objects and is
// merged after every upload (the worst case for rewrites). Whatever the
// ratio of the target to the object size: each byte is rewritten at most
// log2(target/size)+1 times, and the objects number at most 1.2 times the
// target-sized objects the bytes would fill plus about log2(target/size)
// not yet merged. Halving alone leaves objects a little over half the
// target when the ratio is not a power of two (3, 7.5, 100: up to 39
// objects for 20 targets); the fill rule makes them full.
func TestPlanMergesTrickle(t *testing.T) {
	const target = 1 << 20
	for _, perTarget := range []float64{3, 7.5, 32, 100, 1000, 1 << 12 * 1.99, 1 << 15} {
		t.Run(fmt.Sprint(perTarget), func(t *testing.T) {
			size := int64(target / perTarget)
			pol := MergePolicy{TargetBytes: target, Now: time.UnixMilli(2), Below: math.MaxInt64}
			s := &mergeSim{}
			for s.appended < 20*target {
				s.upload(size)
				s.pass(t, pol)
			}
			levels := math.Log2(perTarget)
			if amp := float64(s.rewritten) / float64(s.appended); amp > levels+1 {
				t.Errorf("bytes rewritten %.1f times, want at most %.1f", amp, levels+1)
			}
			for s.pass(t, pol) > 0 { // a fixed point: nothing more to merge
			}
			limit := 1.2*float64(s.appended)/target + levels + 2
			if n := len(s.entries); float64(n) > limit {
				t.Errorf("%d objects for %.1f targets of bytes, want at most %.0f", n, float64(s.appended)/target, limit)
			}
			t.Logf("rewritten %.2fx, %d objects for %.1f targets", float64(s.rewritten)/float64(s.appended), len(s.entries), float64(s.appended)/target)
			if len(PlanMerges(s.entries, pol)) != 0 {
				t.Error("a second pass at the fixed point plans merges")
			}
		})
	}
}

// TestMergeCopiesBatches: a run merged through the Compactor with
// CopyBatches is one ordinary object: the same batch bytes, the entry
// covering the run, the union of the aborted-transaction entries and the
// last object's producer snapshot.
func TestMergeCopiesBatches(t *testing.T) {
	store := objstore.NewMemStore()
	var olds []metadata.TierEntry
	var batches []byte
	var aborted []hotlog.AbortedTxn
	offset, ts := int64(100), int64(1_700_000_000_000)
	for o := range 4 {
		meta := testMeta()
		var log []byte
		for b := range 5 {
			log = append(log, keyedBatch(offset, ts, -1, []kv{{fmt.Sprint("k", b), fmt.Sprint("v", offset)}})...)
			offset, ts = offset+1, ts+10
		}
		if o == 1 { // producer 7's transaction, aborted in this object
			log = append(log, keyedBatch(offset, ts, 7, []kv{{"tx", "aborted"}})...)
			log = append(log, markerBatch(offset+1, ts, 7)...)
			meta.AbortedTxns = []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: offset, LastOffset: offset + 1, LastStableOffset: offset}}
			aborted = append(aborted, meta.AbortedTxns...)
			offset += 2
		}
		meta.ProducerSnapshot = encodeTestSnapshot(offset)
		batches = append(batches, log...)
		olds = append(olds, putRunObject(t, store, log, meta, int64(o+1)))
	}
	runs := PlanMerges(olds, MergePolicy{TargetBytes: 1 << 20, Now: time.UnixMilli(ts), Below: math.MaxInt64})
	if len(runs) != 1 || len(runs[0].Entries) != len(olds) {
		t.Fatalf("plan %v, want one run of the %d objects", runs, len(olds))
	}
	m := NewManifest()
	m.Load(olds)
	c := newTestCompactor(t, store, newMemSwapper(olds), m, &fakeClock{now: time.Unix(1000, 0)})
	res, err := c.Compact(context.Background(), CompactRun{Topic: "orders.v1", UploadEpoch: 9, Entries: runs[0].Entries,
		TargetBytes: 1 << 20, Rewrite: CopyBatches})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.News) != 1 || res.BytesIn != res.BytesOut || res.BatchesIn != res.BatchesOut {
		t.Fatalf("result %+v, want one object of the same batches", res)
	}
	e := res.News[0]
	last := olds[len(olds)-1]
	if e.BaseOffset != olds[0].BaseOffset || e.LastOffset != last.LastOffset || e.FirstTimestamp != olds[0].FirstTimestamp ||
		e.MaxTimestamp != last.MaxTimestamp || e.LeaderEpoch != 1 {
		t.Fatalf("merged entry %+v, olds from %+v to %+v", e, olds[0], last)
	}
	r, err := OpenObject(context.Background(), store, e.Key, e.Size)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadBatches(context.Background(), e.BaseOffset, math.MaxInt32)
	if err != nil || !bytes.Equal(got, batches) {
		t.Fatalf("merged batches differ from the old objects' (%d bytes, want %d): %v", len(got), len(batches), err)
	}
	if fmt.Sprint(r.Index.Aborted) != fmt.Sprint(aborted) {
		t.Fatalf("aborted %+v, want %+v", r.Index.Aborted, aborted)
	}
	if at, ok := r.Index.ProducerSnapshotOffset(); !ok || at != e.LastOffset+1 || !bytes.Equal(r.Index.ProducerSnapshot, encodeTestSnapshot(offset)) {
		t.Fatalf("producer snapshot at %d (%v), want the last object's at %d", at, ok, e.LastOffset+1)
	}
	if segs := m.Segments(testTopicID, 3); len(segs) != 1 || segs[0].Key != e.Key {
		t.Fatalf("manifest after the merge: %+v", segs)
	}
	if len(PlanMerges(m.Segments(testTopicID, 3), MergePolicy{TargetBytes: 1 << 20, Now: time.UnixMilli(ts), Below: math.MaxInt64})) != 0 {
		t.Fatal("a second plan merges again")
	}
}
