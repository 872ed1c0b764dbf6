package tier

// Unit tests of the tiering service through its own interfaces, with
// in-memory twins of the broker's registry and the metadata store and a
// real hot log in a temporary directory: no broker, no etcd.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// memPartition is a twin of the broker's partition view: it leads, and
// its high watermark is the log end.
type memPartition struct {
	log    *hotlog.Log
	cfg    metadata.TopicConfig
	tiered bool
	lag    atomic.Int64
}

func (p *memPartition) Key() metadata.TierPartition {
	return metadata.TierPartition{TopicID: testTopicID, Partition: 0}
}
func (p *memPartition) Topic() string                { return "orders" }
func (p *memPartition) Log() *hotlog.Log             { return p.log }
func (p *memPartition) Config() metadata.TopicConfig { return p.cfg }
func (p *memPartition) Tiered() bool                 { return p.tiered }
func (p *memPartition) KeepsLocalLog() bool          { return false }
func (p *memPartition) Leads() bool                  { return true }
func (p *memPartition) LeaderEpoch() int32           { return 3 }
func (p *memPartition) HighWatermark() int64         { return p.log.LogEndOffset() }
func (p *memPartition) LastStableOffset() int64      { return p.log.LogEndOffset() }
func (p *memPartition) UploadLag() *atomic.Int64     { return &p.lag }

// memRegistry is a twin of the partition registry holding one topic.
type memRegistry struct{ parts []Partition }

func (r memRegistry) LocalPartitions() []Partition { return r.parts }
func (r memRegistry) TopicByID(id metadata.TopicID) (metadata.Topic, bool) {
	if id != testTopicID {
		return metadata.Topic{}, false
	}
	return metadata.Topic{Name: "orders", ID: testTopicID, Replicas: [][]int32{{1}}}, true
}
func (r memRegistry) Topics() []metadata.Topic {
	t, _ := r.TopicByID(testTopicID)
	return []metadata.Topic{t}
}

// memStore is a twin of the metadata store's tier slice.
type memStore struct {
	mu       sync.Mutex
	entries  map[metadata.TierPartition][]metadata.TierEntry
	starts   map[metadata.TierPartition]int64
	deleted  map[metadata.TopicID]bool // ids recorded as deleted
	revision int64
	// holds are the published retention holds (holdsErr: reading them
	// fails); holdReads counts the reads.
	holds     []metadata.RetentionHold
	holdsErr  error
	holdReads int
}

func newMemStore() *memStore {
	return &memStore{entries: map[metadata.TierPartition][]metadata.TierEntry{},
		starts: map[metadata.TierPartition]int64{}, deleted: map[metadata.TopicID]bool{}}
}

func (s *memStore) Cluster() string { return "c1" }

func (s *memStore) RetentionHolds(context.Context) (map[metadata.TierPartition][]metadata.RetentionHold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdReads++
	if s.holdsErr != nil {
		return nil, s.holdsErr
	}
	out := map[metadata.TierPartition][]metadata.RetentionHold{}
	for _, h := range s.holds {
		k := metadata.TierPartition{TopicID: h.TopicID, Partition: h.Partition}
		out[k] = append(out[k], h)
	}
	return out, nil
}

func (s *memStore) CommitTierEntryRev(_ context.Context, e metadata.TierEntry) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := metadata.TierPartition{TopicID: e.TopicID, Partition: e.Partition}
	for _, old := range s.entries[k] {
		if old.BaseOffset == e.BaseOffset {
			return 0, metadata.ErrTierEntryExists
		}
	}
	s.revision++
	e.Version = s.revision
	s.entries[k] = append(s.entries[k], e)
	return s.revision, nil
}

func (s *memStore) TierEntries(_ context.Context, id metadata.TopicID, part int32) ([]metadata.TierEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metadata.TierEntry(nil), s.entries[metadata.TierPartition{TopicID: id, Partition: part}]...), nil
}

func (s *memStore) DeleteTierEntries(_ context.Context, id metadata.TopicID, part int32, doomed []metadata.TierEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := metadata.TierPartition{TopicID: id, Partition: part}
	gone := map[string]bool{}
	for _, e := range doomed {
		gone[e.Key] = true
	}
	var keep []metadata.TierEntry
	for _, e := range s.entries[k] {
		if !gone[e.Key] {
			keep = append(keep, e)
		}
	}
	s.entries[k] = keep
	return nil
}

func (s *memStore) RaiseTierLogStart(_ context.Context, id metadata.TopicID, part int32, offset int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := metadata.TierPartition{TopicID: id, Partition: part}
	s.starts[k] = max(s.starts[k], offset)
	return s.starts[k], nil
}

func (s *memStore) TopicIDKnown(_ context.Context, id metadata.TopicID) (live, deleted bool, err error) {
	return id == testTopicID, s.deleted[id], nil
}

// serviceFixture is a service over one partition of a real hot log.
type serviceFixture struct {
	svc     *Service
	part    *memPartition
	objects *objstore.MemStore
	store   *memStore
	man     *Manifest
}

func newServiceFixture(t *testing.T, cfg Config) *serviceFixture {
	t.Helper()
	l, err := hotlog.Open(hotlog.Config{Dir: t.TempDir(), SegmentBytes: 4096, RetentionMs: time.Millisecond,
		RetentionBytes: -1, Durability: hotlog.DurabilityReplication})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f := &serviceFixture{part: &memPartition{log: l, tiered: true,
		cfg: metadata.TopicConfig{CleanupPolicy: "delete", RetentionMs: -1, RetentionBytes: -1, SegmentBytes: 4096}},
		objects: objstore.NewMemStore(), store: newMemStore(), man: NewManifest()}
	f.svc = NewService(Deps{Config: cfg.WithDefaults(), Objects: f.objects, Manifest: f.man, Store: f.store,
		Registry: memRegistry{parts: []Partition{f.part}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return f
}

// appendBatches appends n batches of three records with old timestamps
// (so hot-log retention finds them due).
func (f *serviceFixture) appendBatches(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		base := f.part.log.LogEndOffset()
		if _, err := f.part.log.Append(makeBatch(t, base, 3, []int64{1000, 1001, 1002}, false, false, 400), 3); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServiceUploadsBeforeLocalRetention(t *testing.T) {
	f := newServiceFixture(t, Config{})
	f.appendBatches(t, 20)
	ctx := context.Background()
	sealed := len(f.part.log.SealedSegments())
	if sealed < 2 {
		t.Fatalf("%d sealed segments; the test needs several", sealed)
	}
	// Nothing uploaded: local retention must keep every segment.
	f.svc.ApplyRetention(ctx, time.Now())
	if got := len(f.part.log.SealedSegments()); got != sealed || f.svc.Counters().LocalSegmentsFreed != 0 {
		t.Fatalf("retention freed segments before their upload: %d of %d left", got, sealed)
	}
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	c := f.svc.Counters()
	if c.SegmentsUploaded != int64(sealed) || len(f.man.Segments(testTopicID, 0)) != sealed {
		t.Fatalf("uploaded %d segments, manifest %d; want %d", c.SegmentsUploaded, len(f.man.Segments(testTopicID, 0)), sealed)
	}
	if f.part.lag.Load() != 0 || len(f.svc.PendingSegments(f.part)) != 0 {
		t.Fatalf("upload lag %d, %d pending after the upload", f.part.lag.Load(), len(f.svc.PendingSegments(f.part)))
	}
	objs, _ := f.objects.List(ctx, "c1/topics/")
	if len(objs) != sealed+1 { // the segments and topic.json
		t.Fatalf("%d objects in the bucket, want %d", len(objs), sealed+1)
	}
	f.svc.ApplyRetention(ctx, time.Now())
	if f.svc.Counters().LocalSegmentsFreed != int64(sealed) || f.part.log.LogStartOffset() == 0 {
		t.Fatalf("retention after upload: counters %+v, local start %d", f.svc.Counters(), f.part.log.LogStartOffset())
	}
	// The freed history is served from the bucket.
	cold, err := NewColdReader(f.objects, ColdConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	src := ColdSource{Reader: cold, Manifest: f.man}
	data, err := src.Read(ctx, f.part.Key(), f.part.log, 0, 1<<20, f.part.log.LogEndOffset(), nil)
	if err != nil || len(data) == 0 {
		t.Fatalf("cold read at 0: %d bytes, %v", len(data), err)
	}
	if h, err := recordbatch.ParseHeader(data); err != nil || h.BaseOffset != 0 {
		t.Fatalf("cold read at 0 starts with %+v, %v", h, err)
	}
}

func TestServiceRemoteRetentionDelaysObjectDeletes(t *testing.T) {
	f := newServiceFixture(t, Config{ObjectDeleteDelay: time.Hour})
	f.appendBatches(t, 20)
	ctx := context.Background()
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	f.part.cfg.RetentionMs = 1 // every object's records are from 1970
	now := time.Now()
	f.svc.ApplyRetention(ctx, now)
	if n := len(f.man.Segments(testTopicID, 0)); n != 0 {
		t.Fatalf("%d manifest entries left after remote retention", n)
	}
	pending := f.svc.PendingDeletes()
	if len(pending) == 0 || f.svc.Counters().RemoteEntriesGone != int64(len(pending)) {
		t.Fatalf("pending deletes %v, counters %+v", pending, f.svc.Counters())
	}
	f.svc.deleteDueObjects(ctx, now) // not due yet
	if _, err := f.objects.Stat(ctx, pending[0]); err != nil {
		t.Fatalf("object deleted before its delay: %v", err)
	}
	f.svc.deleteDueObjects(ctx, now.Add(2*time.Hour))
	if _, err := f.objects.Stat(ctx, pending[0]); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("due object still there: %v", err)
	}
	if c := f.svc.Counters(); c.ObjectsDeleted != int64(len(pending)) {
		t.Fatalf("counters %+v after the delete", c)
	}
}

func TestServiceSweeperKeepsLiveAndUnknownObjects(t *testing.T) {
	f := newServiceFixture(t, Config{OrphanGrace: time.Minute})
	f.appendBatches(t, 20)
	ctx := context.Background()
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	put := func(id metadata.TopicID, base int64) string {
		key, err := SegmentKey(SegmentKeyParts{Cluster: "c1", Topic: "gone", TopicID: id, BaseOffset: base, Epoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.objects.Put(ctx, key, strings.NewReader(""), 0); err != nil {
			t.Fatal(err)
		}
		return key
	}
	deletedID, unknownID := metadata.TopicID{9, 9, 9}, metadata.TopicID{7, 7, 7}
	f.store.deleted[deletedID] = true
	orphanLive := put(testTopicID, 1<<40) // live topic, no manifest entry
	orphanDeleted := put(deletedID, 0)
	kept := put(unknownID, 0) // restorable: etcd never heard of the id
	before, _ := f.objects.List(ctx, "c1/topics/")
	f.svc.SweepOrphans(ctx, time.Now().Add(time.Hour))
	after, _ := f.objects.List(ctx, "c1/topics/")
	if len(after) != len(before)-2 || f.svc.Counters().OrphansDeleted != 2 {
		t.Fatalf("sweep: %d objects of %d left, counters %+v", len(after), len(before), f.svc.Counters())
	}
	for _, key := range []string{orphanLive, orphanDeleted} {
		if _, err := f.objects.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("orphan %s kept: %v", key, err)
		}
	}
	if _, err := f.objects.Stat(ctx, kept); err != nil {
		t.Fatalf("object of an unknown topic id deleted: %v", err)
	}
}

func TestServiceThrottlesOnUploadLag(t *testing.T) {
	f := newServiceFixture(t, Config{MaxUploadLagBytes: 10, ThrottleWait: 60 * time.Millisecond})
	ctx := context.Background()
	f.part.lag.Store(11)
	if err := f.svc.ThrottleUploadLag(ctx, f.part); !errors.Is(err, ErrUploadLag) {
		t.Fatalf("throttle over the limit: %v", err)
	}
	if c := f.svc.Counters(); c.ThrottledProduces != 1 {
		t.Fatalf("counters %+v", c)
	}
	f.part.lag.Store(10)
	if err := f.svc.ThrottleUploadLag(ctx, f.part); err != nil {
		t.Fatalf("throttle at the limit: %v", err)
	}
	f.part.lag.Store(1 << 20)
	f.part.tiered = false
	if err := f.svc.ThrottleUploadLag(ctx, f.part); err != nil {
		t.Fatalf("untiered partition throttled: %v", err)
	}
}

func TestServiceCommitAdoptsExistingEntry(t *testing.T) {
	f := newServiceFixture(t, Config{})
	ctx := context.Background()
	e := metadata.TierEntry{TopicID: testTopicID, Partition: 0, BaseOffset: 0, LastOffset: 9, Key: "c1/a", Size: 5}
	if err := f.svc.CommitSegment(ctx, f.part, e); err != nil {
		t.Fatal(err)
	}
	if err := f.objects.Put(ctx, "c1/b", strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	dup := e
	dup.Key = "c1/b"
	if err := f.svc.CommitSegment(ctx, f.part, dup); err != nil {
		t.Fatalf("commit of a duplicate upload: %v", err)
	}
	if _, err := f.objects.Stat(ctx, "c1/b"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("duplicate object kept: %v", err)
	}
	if segs := f.man.Segments(testTopicID, 0); len(segs) != 1 || segs[0].Key != "c1/a" {
		t.Fatalf("manifest %+v", segs)
	}
	dup.LastOffset = 20
	if err := f.svc.CommitSegment(ctx, f.part, dup); !errors.Is(err, metadata.ErrTierEntryExists) {
		t.Fatalf("commit of a different segment at the same base: %v", err)
	}
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.UploadConcurrency != 2 || c.UploadMaxLagMs() != 60000 || c.Validate() != nil {
		t.Fatalf("defaults %+v", c)
	}
	if bound, ok := c.UploadMaxLagOf(metadata.TopicConfig{TierUploadMaxLagMs: -1}); ok {
		t.Fatalf("topic bound off, got %v", bound)
	}
	c.UploadConcurrency = 0
	if c.Validate() == nil {
		t.Fatal("zero upload concurrency accepted")
	}
}

// memCleaning is a twin of the tiered cleaner's state.
type memCleaning struct {
	due        bool
	checkpoint int64
}

func (c *memCleaning) TierCleanerDue(Partition, metadata.TopicConfig, time.Time) bool { return c.due }
func (c *memCleaning) TierCheckpoint(Partition) int64                                 { return c.checkpoint }
func (c *memCleaning) DeleteCompactedObjects(context.Context)                         {}

func TestServicePlanMergesLeavesLocalAndCleanerDue(t *testing.T) {
	f := newServiceFixture(t, Config{MergeGrace: time.Millisecond})
	cleaning := &memCleaning{}
	f.svc.cleaning = cleaning
	ctx := context.Background()
	for i := int64(0); i < 6; i++ { // six small objects of 10 offsets each
		e := metadata.TierEntry{TopicID: testTopicID, BaseOffset: i * 10, LastOffset: i*10 + 9, Key: "c1/k" + string(rune('a'+i)), Size: 100}
		if err := f.svc.CommitSegment(ctx, f.part, e); err != nil {
			t.Fatal(err)
		}
	}
	f.part.cfg.SegmentBytes = 1 << 20
	// The local log starts at 0: every object is also local, none merges.
	if runs := f.svc.PlanMerges(f.part, time.Now()); len(runs) != 0 {
		t.Fatalf("merging objects the leader still holds: %v", runs)
	}
	f.appendBatches(t, 20)
	if err := f.part.log.DeleteRecordsBefore(f.part.log.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	f.svc.ApplyRetention(ctx, time.Now()) // drops local segments below the new start
	runs := f.svc.PlanMerges(f.part, time.Now())
	if len(runs) == 0 {
		t.Fatalf("nothing to merge below local start %d", f.part.log.LogStartOffset())
	}
	f.part.cfg.CleanupPolicy = "compact"
	cleaning.due = true
	if runs := f.svc.PlanMerges(f.part, time.Now()); len(runs) != 0 {
		t.Fatalf("merging while the tiered cleaner is due: %v", runs)
	}
	cleaning.due, cleaning.checkpoint = false, 30
	for _, run := range f.svc.PlanMerges(f.part, time.Now()) {
		first, last := run.Entries[0].BaseOffset, run.Entries[len(run.Entries)-1].LastOffset
		if first < 30 && last >= 30 {
			t.Fatalf("run %d-%d crosses the cleaner's checkpoint", first, last)
		}
	}
}
