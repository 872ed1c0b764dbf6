package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier/tiertest"
)

// TestCompactSwapRaceMinIO: objects in MinIO, the manifest in etcd, a
// manifest fed only by the etcd watch (as on another broker), and cold
// readers scanning the partition in a loop while the run is compacted,
// swapped and its old objects deleted right after a very short grace
// period. No scan may fail, skip a live record or go backwards.
func TestCompactSwapRaceMinIO(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bucket, err := OpenURL(ctx, tiertest.StartMinIO(t).URL("compact"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, topic := openTestMetadata(t, ctx)
	meta := SegmentMeta{Topic: topic.Name, TopicID: topic.ID, Partition: 0, UploadEpoch: 1}
	f := newCompactFixtureMeta(t, bucket, meta, 6, 150, 40, 200, false)
	for i, e := range f.entries {
		rev, err := store.CommitTierEntryRev(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		f.entries[i].Version = rev
	}
	var lag atomic.Bool
	manifest := watchedManifest(t, ctx, store, &lag)
	waitEntries(t, manifest, topic.ID, f.entries)
	lag.Store(true) // from now on this broker's manifest lags behind etcd
	cold, err := NewColdReader(bucket, ColdConfig{FetchSize: 64 << 10, CacheBytes: 128 << 10, ReadAhead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()

	live := f.latest()
	var stop atomic.Bool
	var scansAfterDelete atomic.Int64
	var deleted atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := scanAndCheck(ctx, cold, manifest, topic.ID, f.entries[0].BaseOffset, live); err != nil {
					errs <- err
					return
				}
				if deleted.Load() {
					scansAfterDelete.Add(1)
				}
			}
		}()
	}
	compactor, err := NewCompactor(CompactorConfig{Store: bucket, Swapper: store, Cluster: "c1", TempDir: t.TempDir(),
		DeleteGrace: time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the readers cache some old blocks
	res, err := compactor.Compact(ctx, CompactRun{Topic: topic.Name, UploadEpoch: 2, Entries: f.entries,
		TargetBytes: 1 << 20, Rewrite: keepLatest(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if gone, err := compactor.DeleteDue(ctx); err != nil || len(gone) != len(f.entries) {
		t.Fatalf("DeleteDue: %v %v", gone, err)
	}
	deleted.Store(true)
	for deadline := time.Now().Add(30 * time.Second); scansAfterDelete.Load() < 6 && time.Now().Before(deadline) && len(errs) == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d reads found their object deleted and retried", goneRetries.Load())
	if goneRetries.Load() == 0 {
		t.Error("no read raced the deletion: the test did not test the race")
	}
	if scansAfterDelete.Load() < 6 {
		t.Fatalf("only %d scans after the deletion", scansAfterDelete.Load())
	}
	got, err := store.TierEntries(ctx, topic.ID, 0)
	if err != nil || fmt.Sprint(keysOf(got)) != fmt.Sprint(keysOf(res.News)) || got[0].Version != res.Revision {
		t.Fatalf("etcd entries %+v %v; want %+v", got, err, res.News)
	}
	for _, e := range f.entries {
		if _, err := bucket.Stat(ctx, e.Key); !bucket.IsNotFound(err) {
			t.Fatalf("old object %s: %v", e.Key, err)
		}
	}
}

func openTestMetadata(t *testing.T, ctx context.Context) (*metadata.Store, metadata.Topic) {
	t.Helper()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: metadatatest.StartEmbedded(t), Cluster: "c1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	topic, err := store.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "compacted", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	return store, topic
}

// watchedManifest is a Manifest kept by the store's watch only; once lag
// is set, each event is applied 100ms late (a broker whose watch lags: its
// readers still use old entries after the old objects are deleted).
func watchedManifest(t *testing.T, ctx context.Context, store *metadata.Store, lag *atomic.Bool) *Manifest {
	t.Helper()
	snap, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := NewManifest()
	m.LoadSnapshot(snap)
	events := store.Watch(ctx, snap.Revision+1)
	go func() {
		for ev := range events {
			if lag.Load() {
				time.Sleep(100 * time.Millisecond)
			}
			m.Apply(ev)
		}
	}()
	return m
}

func waitEntries(t *testing.T, m *Manifest, id metadata.TopicID, want []metadata.TierEntry) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if len(m.Segments(id, 0)) == len(want) {
			return
		}
	}
	t.Fatalf("manifest has %d entries, want %d", len(m.Segments(id, 0)), len(want))
}

// goneRetries counts reads that found their object deleted (and retried).
var goneRetries atomic.Int64

// scanAndCheck reads the partition from offset from to the manifest's end
// as the broker's cold path does (Find, Read, the next entry after an
// empty answer, RetryGone on deleted objects) and checks that record
// offsets only grow and that every live offset is seen.
func scanAndCheck(ctx context.Context, cold *ColdReader, m *Manifest, id metadata.TopicID, from int64, live []int64) error {
	seen := map[int64]bool{}
	offset, prev := from, int64(-1)
	for {
		_, end, ok := m.Range(id, 0)
		if !ok || offset >= end {
			break
		}
		var next int64
		data, err := RetryGone(ctx, 100, 5*time.Millisecond, func() ([]byte, error) {
			e, ok := m.Find(id, 0, offset)
			if !ok {
				return nil, fmt.Errorf("no entry for offset %d", offset)
			}
			next = e.LastOffset + 1
			d, err := cold.Read(ctx, ColdRead{Object: ColdObject{Key: e.Key, Size: e.Size}, Offset: offset,
				MaxBytes: 16 << 10, UpTo: math.MaxInt64})
			if errors.Is(err, ErrObjectGone) {
				goneRetries.Add(1)
			}
			return d, err
		})
		if err != nil {
			return fmt.Errorf("read at %d: %w", offset, err)
		}
		if len(data) == 0 {
			offset = next
			continue
		}
		for len(data) > 0 {
			h, recs, err := parseRecords(data)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if r.offset <= prev || r.offset < offset {
					return fmt.Errorf("offset %d after %d (reading from %d)", r.offset, prev, offset)
				}
				prev, seen[r.offset] = r.offset, true
			}
			data, offset = data[h.Size():], h.LastOffset()+1
		}
	}
	for _, o := range live {
		if !seen[o] {
			return fmt.Errorf("live offset %d not seen", o)
		}
	}
	return nil
}
