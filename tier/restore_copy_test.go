package tier

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// An as-of plan adopted into the new incarnation: every entry's object lies
// under the new id's directory with a footer naming it, the old objects are
// untouched, and the records read back are those of the plan.
func TestAdoptPlanObjectsCopiesIntoNewIncarnation(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 10)}, {base: 10, epoch: 2, stamps: stamps(1010, 5), codec: recordbatch.CodecLZ4}}
	b := []rBatch{{base: 15, epoch: 2, stamps: stamps(1015, 10), codec: recordbatch.CodecZstd}}
	keyA := putRestoreObject(t, store, testTopicID, 2, a, 0)
	keyB := putRestoreObject(t, store, testTopicID, 2, b, 0)
	listed := findRestoreTopic(t, store, testTopicID)
	asOf := time.UnixMilli(1019) // inside b: a is copied, b's head becomes a tail object
	plan, err := RestorePartitionPlan(context.Background(), store, listed, 0, RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if err != nil {
		t.Fatal(err)
	}
	var copied int64
	adopted, err := AdoptPlanObjects(context.Background(), store, listed, plan, restoreNewID, func(n int64) { copied += n })
	if err != nil {
		t.Fatal(err)
	}
	if len(adopted.Entries) != 2 || copied != adopted.Entries[0].Size {
		t.Fatalf("adopted %+v, copied %d bytes", adopted.Entries, copied)
	}
	dir := "c1/topics/" + restoreTopic + "-" + restoreNewID.String() + "/"
	for i, e := range adopted.Entries {
		if !strings.HasPrefix(e.Key, dir) || e.TopicID != restoreNewID {
			t.Fatalf("entry %d %+v not in the new incarnation %s", i, e, dir)
		}
		rd, err := OpenObject(context.Background(), store, e.Key, e.Size)
		if err != nil {
			t.Fatal(err)
		}
		if rd.Index.Footer.TopicID != restoreNewID || rd.Index.Footer.Partition != 0 {
			t.Fatalf("footer of %s names %s-%d", e.Key, rd.Index.Footer.TopicID, rd.Index.Footer.Partition)
		}
	}
	if e, p := adopted.Entries[0], plan.Entries[0]; e.BaseOffset != p.BaseOffset || e.LastOffset != p.LastOffset ||
		e.LeaderEpoch != p.LeaderEpoch || e.MaxTimestamp != p.MaxTimestamp || e.FirstTimestamp != p.FirstTimestamp {
		t.Fatalf("copy's entry %+v differs from the original's %+v", e, p)
	}
	got, _ := readRestored(t, store, adopted.Entries, true)
	checkRecords(t, got, wantRecords(slices.Concat(a, b), 20, nil))
	for _, k := range []string{keyA, keyB} {
		if _, err := store.Stat(context.Background(), k); err != nil {
			t.Fatalf("old incarnation's %s: %v", k, err)
		}
	}
	// The new incarnation alone describes the restored partition.
	again := findRestoreTopic(t, store, restoreNewID)
	if n := len(again.Partitions[0]); n != 2 {
		t.Fatalf("new incarnation lists %d objects, want 2", n)
	}
}
