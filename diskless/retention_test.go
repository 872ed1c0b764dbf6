package diskless

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/recordbatch"
)

// laterDeletes records the objects retention hands over to be deleted
// after a delay (tier.Service in the broker).
type laterDeletes struct{ keys []string }

func (d *laterDeletes) DeleteObjectsLater(keys []string, _ time.Time) {
	d.keys = append(d.keys, keys...)
}

// retentionRig is one diskless partition with three merged objects of
// three records each, [0, 2] [3, 5] [6, 8], and a run [9, 10] not merged
// yet whose records are older than any retention the tests set.
type retentionRig struct {
	*rig
	m       *Merger
	deletes *laterDeletes
	clock   time.Time
	part    MergePartition
	merged  []metadata.TierEntry // the entries the merge wrote
}

// retentionValues are the partition's records, by offset.
var retentionValues = []string{"old0-0", "old0-1", "old0-2", "old1-0", "old1-1", "old1-2",
	"old2-0", "old2-1", "old2-2", "young-0", "young-1"}

// newRetentionRig writes the merged objects' records with timestamps ages
// before the merger's clock.
func newRetentionRig(t *testing.T, cluster string, ages [3]time.Duration) *retentionRig {
	t.Helper()
	r := newRig(t, metadatatest.StartEmbedded(t), cluster, 5*time.Millisecond)
	r.reader.SetMerged(manifestReader{r})
	ctx := context.Background()
	topic, err := r.store.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "retained", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	tp := metadata.TierPartition{TopicID: topic.ID, Partition: 0}
	planned := time.Now().Add(time.Minute) // about the clock below
	for i, age := range ages {
		if _, err := r.app.Append(ctx, tp, batchAt(fmt.Sprintf("old%d", i), 3, -1, -1, planned.Add(-age).UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	waitPositions(t, r.ix, tp, 9)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	if _, err := r.app.Append(ctx, tp, batchAt("young", 2, -1, -1, planned.Add(-100*time.Hour).UnixMilli())); err != nil {
		t.Fatal(err)
	}
	waitPositions(t, r.ix, tp, 11)
	rr := &retentionRig{rig: r, deletes: &laterDeletes{}, clock: mid.Add(time.Minute),
		part: MergePartition{Topic: "retained", Part: tp, Partitions: 1}}
	// Bytes 1: one merged object per run. The clock makes the runs
	// committed before mid a minute old and the young one not.
	rr.m = NewMerger(MergeConfig{Cluster: cluster, Now: func() time.Time { return rr.clock }, Age: time.Minute, Bytes: 1},
		r.store, r.bucket, r.reader, rr.deletes, r.stats)
	if err := rr.m.MergePartition(ctx, rr.part); err != nil {
		t.Fatal(err)
	}
	rr.merged, err = r.store.TierEntries(ctx, tp.TopicID, tp.Partition)
	if err != nil || len(rr.merged) != 3 || rr.merged[2].LastOffset != 8 {
		t.Fatalf("after the merge: %+v, %v; want three entries up to 8", rr.merged, err)
	}
	return rr
}

// apply runs a retention pass with the topic's configs.
func (rr *retentionRig) apply(t *testing.T, configs map[string]string) {
	t.Helper()
	rr.part.Configs = configs
	if err := rr.m.ApplyRetention(context.Background(), rr.part); err != nil {
		t.Fatalf("retention with %v: %v", configs, err)
	}
}

// check: the head's start is start; the merged entries from kept on are
// in the manifest and the earlier ones were handed over for deletion, but
// are still in the bucket; the run was not touched; reads below start are
// out of range and from start on read every record.
func (rr *retentionRig) check(t *testing.T, start int64, kept int) {
	t.Helper()
	ctx := context.Background()
	tp := rr.part.Part
	heads, err := rr.store.DisklessHeads(ctx, []metadata.TierPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if head, err := decodeHead(heads[0].Value); err != nil || head.Start != start || head.Next != 11 {
		t.Fatalf("head %+v, %v; want start %d, next 11", head, err, start)
	}
	entries, err := rr.store.TierEntries(ctx, tp.TopicID, tp.Partition)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entryKeys(entries), entryKeys(rr.merged[kept:]); !slices.Equal(got, want) {
		t.Fatalf("manifest holds %v, want %v", got, want)
	}
	if got, want := rr.deletes.keys, entryKeys(rr.merged[:kept]); !slices.Equal(got, want) {
		t.Fatalf("objects handed over for deletion: %v, want %v", got, want)
	}
	for _, key := range rr.deletes.keys {
		if _, err := rr.bucket.Stat(ctx, key); err != nil {
			t.Fatalf("object %s deleted at once (%v), want it left for the delayed delete", key, err)
		}
	}
	snap, err := rr.store.LoadDiskless(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Runs) != 1 || snap.Runs[0].Partition != tp || snap.Runs[0].BaseOffset != 9 {
		t.Fatalf("runs in etcd: %+v, want only the young one at 9", snap.Runs)
	}
	waitStart(t, rr.ix, tp, start)
	for _, below := range []int64{0, start - 1} {
		if below < 0 || below >= start {
			continue
		}
		if _, err := rr.reader.Read(ctx, tp, below, 1<<20, 1<<62); !errors.Is(err, hotlog.ErrOffsetOutOfRange) {
			t.Fatalf("read at %d below the start %d: %v, want ErrOffsetOutOfRange", below, start, err)
		}
	}
	var got []string
	for offset := start; offset < 11; {
		data, err := rr.reader.Read(ctx, tp, offset, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		h, err := recordbatch.ParseHeader(data)
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		// A read from inside a batch returns the whole batch.
		vs := values(t, data, h.BaseOffset)[offset-h.BaseOffset:]
		got = append(got, vs...)
		offset += int64(len(vs))
	}
	if !slices.Equal(got, retentionValues[start:]) {
		t.Fatalf("read from %d: %v", start, got)
	}
}

func entryKeys(entries []metadata.TierEntry) []string {
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	return keys
}

func waitStart(t *testing.T, ix *Index, tp metadata.TierPartition, start int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s, _, ch := ix.Positions(tp)
		if s == start {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("index of %v has start %d, want %d", tp, s, start)
		}
	}
}

// TestRetentionByTime: retention.ms removes the merged objects whose
// newest record is older, oldest first; the start moves past them; the
// run, though older still, stays until merged.
func TestRetentionByTime(t *testing.T) {
	rr := newRetentionRig(t, "dl-ret-time", [3]time.Duration{3 * time.Hour, 2 * time.Hour, 10 * time.Minute})
	rr.apply(t, nil) // the default, 7 days: nothing is that old
	rr.check(t, 0, 0)
	rr.apply(t, map[string]string{"retention.ms": strconv.FormatInt(time.Hour.Milliseconds(), 10)})
	rr.check(t, 6, 2)
	rr.apply(t, map[string]string{"retention.ms": strconv.FormatInt(time.Hour.Milliseconds(), 10)})
	rr.check(t, 6, 2)
	rr.clock = rr.clock.Add(time.Hour)
	rr.apply(t, map[string]string{"retention.ms": strconv.FormatInt(time.Hour.Milliseconds(), 10)})
	rr.check(t, 9, 3)
	if got := rr.stats.Snapshot().Retained; got != 3 {
		t.Fatalf("Retained %d, want 3", got)
	}
	// A merge that committed the run's entry and has not deleted the run
	// yet: the entry stays, however old, until the run is gone.
	ctx := context.Background()
	tp := rr.part.Part
	covering := metadata.TierEntry{TopicID: tp.TopicID, Partition: tp.Partition, BaseOffset: 9, LastOffset: 10,
		MaxTimestamp: 0, Key: "dl-ret-time/covering.seg", Size: 100}
	if err := rr.store.CommitTierEntry(ctx, covering); err != nil {
		t.Fatal(err)
	}
	rr.apply(t, map[string]string{"retention.ms": "1"})
	if entries, err := rr.store.TierEntries(ctx, tp.TopicID, tp.Partition); err != nil || len(entries) != 1 || entries[0].Key != covering.Key {
		t.Fatalf("manifest %+v, %v; want the entry the run still covers", entries, err)
	}
	heads, err := rr.store.DisklessHeads(ctx, []metadata.TierPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if head, err := decodeHead(heads[0].Value); err != nil || head.Start != 9 || len(rr.deletes.keys) != 3 {
		t.Fatalf("head %+v (%v), deletes %v after the pass; want start 9 and the three merged objects", head, err, rr.deletes.keys)
	}
}

// TestRetentionByBytes: retention.bytes counts the merged objects and the
// runs and removes the oldest objects past it; DeleteRecords' start
// removes the objects wholly below it; a limit below the run's own bytes
// removes every merged object and leaves the run.
func TestRetentionByBytes(t *testing.T) {
	rr := newRetentionRig(t, "dl-ret-bytes", [3]time.Duration{time.Minute, time.Minute, time.Minute})
	runBytes := rr.ix.runBytes(rr.part.Part)
	if runBytes <= 0 {
		t.Fatalf("run bytes %d", runBytes)
	}
	limit := rr.merged[1].Size + rr.merged[2].Size + runBytes
	rr.apply(t, map[string]string{"retention.ms": "-1", "retention.bytes": strconv.FormatInt(limit, 10)})
	rr.check(t, 3, 1)
	rr.apply(t, map[string]string{"retention.ms": "-1", "retention.bytes": strconv.FormatInt(limit, 10)})
	rr.check(t, 3, 1)
	// DeleteRecords to 7: [3, 5] is wholly below it and goes; [6, 8] stays.
	if _, err := RaiseStart(context.Background(), rr.store, rr.part.Part, 7); err != nil {
		t.Fatal(err)
	}
	waitStart(t, rr.ix, rr.part.Part, 7) // retention reads the start from the index
	rr.apply(t, map[string]string{"retention.ms": "-1"})
	rr.check(t, 7, 2)
	rr.apply(t, map[string]string{"retention.ms": "-1", "retention.bytes": "1"})
	rr.check(t, 9, 3)
}
