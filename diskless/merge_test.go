package diskless

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier"
)

// manifestReader reads merged offsets straight from the manifest in etcd
// and the segment objects (the broker does it through its cold reader).
type manifestReader struct{ r *rig }

func (m manifestReader) ReadMerged(ctx context.Context, tp metadata.TierPartition, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	entries, err := m.r.store.TierEntries(ctx, tp.TopicID, tp.Partition)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.BaseOffset <= offset && offset <= e.LastOffset {
			obj, err := tier.OpenObject(ctx, m.r.bucket, e.Key, e.Size)
			if err != nil {
				return nil, err
			}
			return obj.ReadBatches(ctx, offset, maxBytes)
		}
	}
	return nil, fmt.Errorf("%w: %d not merged", hotlog.ErrOffsetOutOfRange, offset)
}

// TestMergeThenSweep: runs older than the merge age become one segment
// object with a manifest entry; the partition reads the same through the
// merged object and the runs after it; the shared objects are deleted once
// unreferenced for the grace, and not before.
func TestMergeThenSweep(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-merge", 5*time.Millisecond)
	r.reader.SetMerged(manifestReader{r})
	ctx := context.Background()
	topic, err := r.store.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "merged", Replicas: [][]int32{{1}, {1}, {1}}})
	if err != nil {
		t.Fatal(err)
	}
	tp := metadata.TierPartition{TopicID: topic.ID, Partition: 2}
	for i := 0; i < 4; i++ {
		if _, err := r.app.Append(ctx, tp, batch(fmt.Sprintf("old%d", i), 3, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	waitPositions(t, r.ix, tp, 12)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	if _, err := r.app.Append(ctx, tp, batch("young", 2, -1, -1)); err != nil {
		t.Fatal(err)
	}
	waitPositions(t, r.ix, tp, 14)
	// The merge's clock: a minute after mid, so the runs committed before
	// mid are a minute old and the young one is not.
	clock := mid.Add(time.Minute)
	m := NewMerger(MergeConfig{Cluster: "dl-merge", Now: func() time.Time { return clock }, Age: time.Minute, SweepGrace: time.Minute},
		r.store, r.bucket, r.reader, &laterDeletes{}, r.stats)
	if err := m.MergePartition(ctx, MergePartition{Topic: "merged", Part: tp, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	entries, err := r.store.TierEntries(ctx, tp.TopicID, tp.Partition)
	if err != nil || len(entries) != 1 || entries[0].BaseOffset != 0 || entries[0].LastOffset != 11 {
		t.Fatalf("manifest after the merge: %+v, %v; want one entry [0, 11]", entries, err)
	}
	if _, err := r.bucket.Stat(ctx, tier.TopicConfigKey("dl-merge", "merged", topic.ID)); err != nil {
		t.Fatalf("topic.json after the first merge: %v", err)
	}
	checkMergedInBucket(t, r, topic.ID, tp.Partition, "[old0-0 old0-1 old0-2 old1-0 old1-1 old1-2 old2-0 old2-1 old2-2 old3-0 old3-1 old3-2]")
	if first, ok := r.ix.firstRunBase(tp); !ok || first != 12 {
		t.Fatalf("first run after the merge at %d (%v), want 12", first, ok)
	}
	if got := readValues(ctx, t, r.reader, tp, 14); fmt.Sprint(got) != "[old0-0 old0-1 old0-2 old1-0 old1-1 old1-2 old2-0 old2-1 old2-2 old3-0 old3-1 old3-2 young-0 young-1]" {
		t.Fatalf("read across the merged object and the runs: %v", got)
	}
	// Sweep: first sight of an unreferenced object starts its grace.
	before, _ := r.bucket.List(ctx, ObjectPrefix("dl-merge"))
	if err := m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(30 * time.Second)
	if err := m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if objs, _ := r.bucket.List(ctx, ObjectPrefix("dl-merge")); len(objs) != len(before) {
		t.Fatalf("swept within the grace: %d objects left of %d", len(objs), len(before))
	}
	clock = clock.Add(time.Hour)
	if err := m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := r.bucket.List(ctx, ObjectPrefix("dl-merge"))
	if len(after) != 1 || r.stats.Snapshot().Swept != int64(len(before)-1) {
		t.Fatalf("after the grace %d shared objects are left of %d (swept %d); want only the young run's", len(after), len(before), r.stats.Snapshot().Swept)
	}
}

// checkMergedInBucket: from the bucket alone, as `strata replay` and
// `strata restore` read it, the merged objects of the partition hold
// want from offset 0, and restore plans them as one range from 0.
func checkMergedInBucket(t *testing.T, r *rig, id metadata.TopicID, partition int32, want string) {
	t.Helper()
	ctx := context.Background()
	listed, err := tier.FindReplayTopic(ctx, r.bucket, "dl-merge", "merged", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if listed.TopicID != id || listed.File == nil || listed.File.Partitions != 3 {
		t.Fatalf("replay finds topic %s, topic.json %+v (%v)", listed.TopicID, listed.File, listed.FileErr)
	}
	rd := tier.NewReplayReader(ctx, r.bucket, tier.PlanReplay(listed.Partitions[partition]), tier.ReplayOptions{FromTime: -1, Committed: true})
	defer rd.Close()
	var got []string
	next := int64(0)
	for {
		b, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		vs := values(t, b.Data, next)
		got = append(got, vs...)
		next += int64(len(vs))
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("replayed from the bucket: %v", got)
	}
	plan, err := tier.RestorePartitionPlan(ctx, r.bucket, listed, partition, tier.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.LogStart != 0 || plan.End != next || len(plan.Entries) != 1 || plan.Entries[0].TopicID != id || len(plan.Gaps) != 0 {
		t.Fatalf("restore plan %+v, want one entry [0, %d)", plan, next)
	}
}

// failingDeletes fails the next DeleteDisklessRuns calls.
type failingDeletes struct {
	MergeStore
	failures int
}

func (f *failingDeletes) DeleteDisklessRuns(ctx context.Context, p metadata.TierPartition, bases []int64) error {
	if f.failures > 0 {
		f.failures--
		return errors.New("etcd unavailable")
	}
	return f.MergeStore.DeleteDisklessRuns(ctx, p, bases)
}

// TestMergeAfterAFailedDelete: a pass commits its entry and fails to delete
// the runs; more runs arrive; the next pass deletes only the runs the entry
// covers and merges the rest into an object of its own, so every offset
// stays readable and the manifest has no gap and no overlap.
func TestMergeAfterAFailedDelete(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-merge2", 5*time.Millisecond)
	r.reader.SetMerged(manifestReader{r})
	ctx := context.Background()
	topic, err := r.store.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "merged2", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	tp := metadata.TierPartition{TopicID: topic.ID, Partition: 0}
	appendN := func(tag string, n int) {
		for i := 0; i < n; i++ {
			if _, err := r.app.Append(ctx, tp, batch(fmt.Sprintf("%s%d", tag, i), 2, -1, -1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN("a", 3)
	waitPositions(t, r.ix, tp, 6)
	store := &failingDeletes{MergeStore: r.store, failures: 1}
	clock := time.Now().Add(time.Hour)
	m := NewMerger(MergeConfig{Cluster: "dl-merge2", Now: func() time.Time { return clock }}, store, r.bucket, r.reader, &laterDeletes{}, r.stats)
	part := MergePartition{Topic: "merged2", Part: tp, Partitions: 1}
	if err := m.MergePartition(ctx, part); err == nil {
		t.Fatal("the merge whose run deletion failed reported success")
	}
	appendN("b", 2)
	waitPositions(t, r.ix, tp, 10)
	clock = time.Now().Add(time.Hour)
	if err := m.MergePartition(ctx, part); err != nil {
		t.Fatal(err)
	}
	entries, err := r.store.TierEntries(ctx, tp.TopicID, tp.Partition)
	if err != nil || len(entries) != 2 || entries[0].BaseOffset != 0 || entries[0].LastOffset != 5 ||
		entries[1].BaseOffset != 6 || entries[1].LastOffset != 9 {
		t.Fatalf("manifest %+v, %v; want [0, 5] then [6, 9]", entries, err)
	}
	if got := readValues(ctx, t, r.reader, tp, 10); fmt.Sprint(got) != "[a0-0 a0-1 a1-0 a1-1 a2-0 a2-1 b0-0 b0-1 b1-0 b1-1]" {
		t.Fatalf("read %v", got)
	}
}

// readValues reads the values of tp's offsets [0, end) through r, as many
// reads as it takes.
func readValues(ctx context.Context, t *testing.T, r *Reader, tp metadata.TierPartition, end int64) []string {
	t.Helper()
	var got []string
	for offset := int64(0); offset < end; {
		data, err := r.Read(ctx, tp, offset, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		vs := values(t, data, offset)
		if len(vs) == 0 {
			t.Fatalf("read at %d returned no record", offset)
		}
		got = append(got, vs...)
		offset += int64(len(vs))
	}
	return got
}
