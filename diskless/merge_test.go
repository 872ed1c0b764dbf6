package diskless

import (
	"context"
	"fmt"
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
	if first, ok := r.ix.firstRunBase(tp); !ok || first != 12 {
		t.Fatalf("first run after the merge at %d (%v), want 12", first, ok)
	}
	var got []string
	for offset := int64(0); offset < 14; {
		data, err := r.reader.Read(ctx, tp, offset, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		vs := values(t, data, offset)
		got = append(got, vs...)
		offset += int64(len(vs))
	}
	if fmt.Sprint(got) != "[old0-0 old0-1 old0-2 old1-0 old1-1 old1-2 old2-0 old2-1 old2-2 old3-0 old3-1 old3-2 young-0 young-1]" {
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
