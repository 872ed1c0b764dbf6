package cluster

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The diskless restore test's topic and load.
const (
	dlRestoreTopic      = "dl-restore"
	dlRestorePartitions = 3
	dlRestoreRecords    = 200              // per partition, before the disaster
	dlRestoreMore       = 50               // per partition, after the restore
	dlRestoreMergeWait  = 90 * time.Second // every record merged into segment objects
)

// TestDisklessRestoreAfterMerge (acceptance: after merging, `strata replay`
// and `strata restore` read a diskless topic like any other): three
// brokers merge a diskless topic's runs into segment objects within about
// a second (--diskless-merge-age 1s). Once `strata replay` reads every
// acknowledged record from the bucket alone, every broker and etcd lose
// their data (the drill's disaster), and `strata restore` rebuilds the
// topic as a diskless topic: every record is read back through the brokers
// at its offset, and records produced afterwards get the offsets after the
// restored ones. Run twice: restoring the latest state (same topic id,
// objects in place) and restoring as of a time between two rounds of
// produces (a new topic id; the second round is left out).
func TestDisklessRestoreAfterMerge(t *testing.T) {
	for _, mode := range []struct {
		name string
		asOf bool
	}{{"latest", false}, {"as-of", true}} {
		t.Run(mode.name, func(t *testing.T) { runDisklessRestore(t, mode.asOf) })
	}
}

func runDisklessRestore(t *testing.T, asOf bool) {
	defer timed(t, "diskless restore")()
	c := Start(t, Config{MinIO: true, LogLevel: "info", ExtraArgs: []string{"--diskless-append-linger", "20ms",
		"--diskless-merge-age", "1s", "--diskless-merge-interval", "1s"}})
	c.CreateTopic(dlRestoreTopic, dlRestorePartitions, 3, map[string]string{"diskless.enable": "true"})
	produced := produceDisklessRounds(t, c, "a", dlRestoreRecords)
	restored := cloneProduced(produced)
	var cut time.Time
	if asOf {
		time.Sleep(50 * time.Millisecond) // records carry millisecond timestamps
		cut = time.Now()
		time.Sleep(50 * time.Millisecond)
		for p, later := range produceDisklessRounds(t, c, "b", dlRestoreRecords/2) {
			maps.Copy(produced[p], later)
		}
	}
	waitReplayed(t, c, produced)
	if !asOf {
		// The merged objects check out against the manifest, batch CRCs included.
		out, err := c.runStrata(time.Minute, "tier", "verify", "--full", "--object-store", c.ObjectStore, "--http", c.Broker(1).HTTPAddr)
		if err != nil || !strings.Contains(out, "\n0 problems") {
			t.Fatalf("tier verify --full of the merged diskless topic (%v):\n%s", err, out)
		}
		t.Logf("strata tier verify --full:\n%s", out)
	}

	killEveryBroker(c)
	startEmptyCluster(c)
	args := []string{"restore", "--object-store", c.ObjectStore, "--cluster", "cluster",
		"--http", c.Broker(1).HTTPAddr, "--brokers", strings.Join(c.Addrs(), ",")}
	if asOf {
		args = append(args, "--as-of", cut.UTC().Format(time.RFC3339Nano))
	}
	out, err := c.runStrata(restoreTimeout, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("strata restore:\n%s", out)
	if !strings.Contains(out, "restored as diskless topic id") || !strings.Contains(out, "runs not merged") {
		t.Fatalf("restore did not report a diskless topic and what it cannot restore:\n%s", out)
	}

	readDisklessBack(t, c, restored, "the restored records")
	more := produceDisklessRounds(t, c, "c", dlRestoreMore)
	for p, recs := range more {
		if first := slices.Min(slices.Collect(maps.Keys(recs))); first != dlRestoreRecords {
			t.Fatalf("p%d: the first record produced after the restore got offset %d, want %d (after the restored ones)",
				p, first, dlRestoreRecords)
		}
		maps.Copy(restored[p], recs)
	}
	readDisklessBack(t, c, restored, "the restored records and those produced after")
	for _, b := range c.Brokers() {
		if matches, _ := filepath.Glob(filepath.Join(b.DataDir, dlRestoreTopic+"-*")); len(matches) > 0 {
			t.Fatalf("broker %d has local directories for the restored diskless topic: %v", b.ID, matches)
		}
	}
}

// produceDisklessRounds produces n records to every partition of the
// topic (idempotent, acks=all, ten per request) and returns each one's
// value by partition and offset.
func produceDisklessRounds(t *testing.T, c *Cluster, tag string, n int) map[int32]map[int64]string {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(dlRestoreTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	out := map[int32]map[int64]string{}
	for i := 0; i < n; i += 10 {
		var recs []*kgo.Record
		for p := int32(0); p < dlRestorePartitions; p++ {
			for j := i; j < min(i+10, n); j++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-p%d-%05d", tag, p, j)})
			}
		}
		if err := produceSync(t, cl, time.Minute, recs...); err != nil {
			t.Fatalf("produce round %s: %v", tag, err)
		}
		for _, r := range recs {
			if out[r.Partition] == nil {
				out[r.Partition] = map[int64]string{}
			}
			out[r.Partition][r.Offset] = string(r.Value)
		}
	}
	return out
}

func cloneProduced(in map[int32]map[int64]string) map[int32]map[int64]string {
	out := map[int32]map[int64]string{}
	for p, recs := range in {
		out[p] = maps.Clone(recs)
	}
	return out
}

// waitReplayed waits until `strata replay` reads exactly want from the
// bucket alone: every record merged into segment objects, at its offset.
func waitReplayed(t *testing.T, c *Cluster, want map[int32]map[int64]string) {
	t.Helper()
	start := time.Now()
	c.WaitFor("every record merged and replayed from the bucket", dlRestoreMergeWait, func() (bool, string) {
		got, _, err := c.replayBucket(dlRestoreTopic)
		if err != nil {
			return false, err.Error()
		}
		return sameRecords(got, want)
	})
	t.Logf("strata replay read all %d records from the bucket %v after the last produce", countRecords(want),
		time.Since(start).Round(time.Millisecond))
}

// sameRecords compares two partition → offset → value maps, saying where
// they first differ.
func sameRecords(got, want map[int32]map[int64]string) (bool, string) {
	for p := int32(0); p < dlRestorePartitions; p++ {
		if len(got[p]) != len(want[p]) {
			return false, fmt.Sprintf("p%d: %d records, want %d", p, len(got[p]), len(want[p]))
		}
		for offset, v := range want[p] {
			if got[p][offset] != v {
				return false, fmt.Sprintf("p%d@%d: %q, want %q", p, offset, got[p][offset], v)
			}
		}
	}
	return true, ""
}

func countRecords(recs map[int32]map[int64]string) int {
	n := 0
	for _, m := range recs {
		n += len(m)
	}
	return n
}

// readDisklessBack reads every partition through the brokers from offset
// 0 and checks that its offsets run from there to its end, which is one
// past the last of want, holding want's values.
func readDisklessBack(t *testing.T, c *Cluster, want map[int32]map[int64]string, what string) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	ends := map[int32]int64{}
	for p, recs := range want {
		ends[p] = slices.Max(slices.Collect(maps.Keys(recs))) + 1
	}
	c.WaitFor(fmt.Sprintf("%s: offsets listed", what), restoredReadTimeout, func() (bool, string) {
		starts, listed, err := listBounds(adm, dlRestoreTopic, dlRestorePartitions)
		if err != nil {
			return false, err.Error()
		}
		for p := int32(0); p < dlRestorePartitions; p++ {
			if starts[p] != 0 || listed[p] != ends[p] {
				return false, fmt.Sprintf("p%d: [%d, %d), want [0, %d)", p, starts[p], listed[p], ends[p])
			}
		}
		return true, ""
	})
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < dlRestorePartitions; p++ {
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dlRestoreTopic: offsets}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), restoredReadTimeout)
	defer cancel()
	got := map[int32]map[int64]string{}
	next := map[int32]int64{}
	for p := int32(0); p < dlRestorePartitions; p++ {
		got[p], next[p] = map[int64]string{}, 0
	}
	for done := false; !done; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read up to %v of ends %v within %v: %v", what, next, ends, restoredReadTimeout, fetches.Errors())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("%s: p%d: offset %d after %d (a hole or a repeat)", what, r.Partition, r.Offset, next[r.Partition]-1)
			}
			got[r.Partition][r.Offset] = string(r.Value)
			next[r.Partition]++
		})
		done = true
		for p, end := range ends {
			done = done && next[p] >= end
		}
	}
	if ok, why := sameRecords(got, want); !ok {
		t.Fatalf("%s read through the brokers: %s", what, why)
	}
	t.Logf("%s: read back %d records through the brokers, ends %v", what, countRecords(got), ends)
}
