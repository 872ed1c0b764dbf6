package tier

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier/tiertest"
)

// etcdPartition is a memPartition of a topic created in etcd.
type etcdPartition struct {
	*memPartition
	topic metadata.Topic
}

func (p etcdPartition) Key() metadata.TierPartition {
	return metadata.TierPartition{TopicID: p.topic.ID, Partition: 0}
}
func (p etcdPartition) Topic() string { return p.topic.Name }

// etcdRegistry holds the one etcdPartition.
type etcdRegistry struct{ p etcdPartition }

func (r etcdRegistry) LocalPartitions() []Partition { return []Partition{r.p} }
func (r etcdRegistry) TopicByID(id metadata.TopicID) (metadata.Topic, bool) {
	return r.p.topic, id == r.p.topic.ID
}
func (r etcdRegistry) Topics() []metadata.Topic { return []metadata.Topic{r.p.topic} }

// TestRetentionHoldMinIO: objects in MinIO, the manifest and the holds in
// etcd. A group's hold published with PublishRetentionHolds keeps its
// object (and every later one) past retention.ms until retention.ms +
// retention.hold.ms, while the objects before it go; then the held
// objects go too, from etcd and from the bucket.
func TestRetentionHoldMinIO(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bucket, err := OpenURL(ctx, tiertest.StartMinIO(t).URL("hold"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, topic := openTestMetadata(t, ctx)
	l, err := hotlog.Open(hotlog.Config{Dir: t.TempDir(), SegmentBytes: 4096, RetentionMs: time.Millisecond,
		RetentionBytes: -1, Durability: hotlog.DurabilityReplication})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	const holdMs = 600_000
	p := etcdPartition{&memPartition{log: l, tiered: true, cfg: metadata.TopicConfig{CleanupPolicy: "delete",
		RetentionMs: 1, RetentionBytes: -1, SegmentBytes: 4096, RetentionHoldMs: holdMs, RetentionHoldBytes: -1}}, topic}
	manifest := NewManifest()
	svc := NewService(Deps{Config: Config{ObjectDeleteDelay: time.Second}, Objects: bucket, Manifest: manifest,
		Store: store, Registry: etcdRegistry{p}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for range 20 { // records at 1000-1002 ms
		if _, err := l.Append(makeBatch(t, l.LogEndOffset(), 3, []int64{1000, 1001, 1002}, false, false, 400), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.UploadPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	entries := manifest.Segments(topic.ID, 0)
	if len(entries) < 4 {
		t.Fatalf("%d entries; the test needs several", len(entries))
	}
	need := entries[2].BaseOffset + 2
	now := time.UnixMilli(300_000) // past retention.ms, within the hold
	if err := store.PublishRetentionHolds(ctx, 7, []metadata.RetentionHold{
		{TopicID: topic.ID, Partition: 0, Group: "slow", Offset: need, CommitMs: now.UnixMilli()}}); err != nil {
		t.Fatal(err)
	}

	svc.ApplyRetention(ctx, now)
	svc.deleteDueObjects(ctx, now.Add(time.Hour))
	checkTiered(t, ctx, store, bucket, topic.ID, entries, 2)
	if held := svc.Status(p).Held; held.Objects != len(entries)-2 || len(held.By) != 1 || held.By[0].Group != "slow" {
		t.Fatalf("status shows held %+v", held)
	}

	expiry := time.UnixMilli(1002 + 1 + holdMs) // newest record + retention.ms + hold.ms
	svc.ApplyRetention(ctx, expiry.Add(-time.Millisecond))
	checkTiered(t, ctx, store, bucket, topic.ID, entries, 2)
	svc.ApplyRetention(ctx, expiry)
	svc.deleteDueObjects(ctx, expiry.Add(time.Hour))
	checkTiered(t, ctx, store, bucket, topic.ID, entries, len(entries))
}

// checkTiered checks that etcd and the bucket hold exactly entries[gone:].
func checkTiered(t *testing.T, ctx context.Context, store *metadata.Store, bucket ObjectStore, id metadata.TopicID,
	entries []metadata.TierEntry, gone int) {
	t.Helper()
	got, err := store.TierEntries(ctx, id, 0)
	if err != nil || len(got) != len(entries)-gone || (len(got) > 0 && got[0].BaseOffset != entries[gone].BaseOffset) {
		t.Fatalf("etcd has %d entries (%v), want the last %d of %d", len(got), err, len(entries)-gone, len(entries))
	}
	for i, e := range entries {
		_, err := bucket.Stat(ctx, e.Key)
		if i < gone && !bucket.IsNotFound(err) {
			t.Fatalf("object %d (%s) still in the bucket: %v", i, e.Key, err)
		}
		if i >= gone && err != nil {
			t.Fatalf("held object %d (%s): %v", i, e.Key, err)
		}
	}
}
