package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/test/history"
)

// The drill's topic, load and margins.
const (
	drillTopic      = "drill"
	drillGroup      = "drill-group"
	drillPartitions = 6
	drillRate       = 20 // records per second per partition
	drillValueSize  = 64
	drillBound      = 10 * time.Second // --tier-upload-max-lag
	drillRun        = 40 * time.Second // of traffic before the disaster
	// drillMargin: what was acknowledged (records) or committed (group
	// offsets) more than drillBound+drillMargin before the disaster must
	// come back; the margin covers the upload and its manifest commit.
	drillMargin         = 5 * time.Second
	restoredReadTimeout = 90 * time.Second // reading the restored topic back
	restoredGroupWait   = 60 * time.Second // the new coordinator answering OffsetFetch
)

// TestDisasterDrillRestoresFromBucket (tier.upload.max.lag.ms acceptance):
// while a producer and a consumer group run, every broker is SIGKILLed
// and every broker disk and etcd's data are deleted: only the bucket is
// left. A brand-new cluster (same bucket and cluster name) is started and
// `strata restore` rebuilds the topic and the group's offsets from the
// bucket alone. Everything acknowledged more than the bound (plus a
// margin) before the disaster must come back at its offset, nothing may
// be duplicated or reordered, and the group's offsets must be no older
// than the bound. Run twice: restoring as of the disaster's time (a new
// topic incarnation with copied objects) and restoring the latest state
// (the same topic id, the objects in place).
func TestDisasterDrillRestoresFromBucket(t *testing.T) {
	for _, mode := range []struct {
		name string
		asOf bool
	}{{"as-of", true}, {"latest", false}} {
		t.Run(mode.name, func(t *testing.T) { runDisasterDrill(t, mode.asOf) })
	}
}

func runDisasterDrill(t *testing.T, asOf bool) {
	defer timed(t, "disaster drill")()
	c := Start(t, Config{MinIO: true, LogLevel: "info", ExtraArgs: []string{"--tier-upload-max-lag", drillBound.String()}})
	replicatedTopic(t, c, drillTopic, drillPartitions, nil)
	h := history.New()
	p := startTimedProducer(c, h, drillTopic, drillPartitions, drillRate, drillValueSize)
	g := startCommittingGroup(c, drillGroup, drillTopic)
	time.Sleep(drillRun)

	disaster := killEveryBroker(c)
	// The clients go before any new broker listens on their addresses.
	if err := p.abandon(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	if err := g.abandon(); err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	t.Logf("before the disaster: producer %v; %v", p, g)
	startEmptyCluster(c)
	restoreFromBucket(t, c, disaster, asOf)

	due := disaster.Add(-(drillBound + drillMargin))
	starts, ends, restored := readRestored(t, c, drillTopic, drillPartitions)
	checkRestoredRecords(t, p.acked(), starts, ends, restored, due, disaster)
	checkRestoredHistory(t, h, p.acked(), starts, restored, due)
	checkRestoredGroup(t, c, g, ends, due, disaster)
}

// killEveryBroker SIGKILLs every running broker, one right after the
// other, and returns the moment before the first signal.
func killEveryBroker(c *Cluster) time.Time {
	c.t.Helper()
	at := time.Now()
	for _, b := range c.Brokers() {
		if b.Running() {
			c.Kill(b.ID)
		}
	}
	return at
}

// startEmptyCluster deletes every broker's data dir and etcd's data, then
// starts etcd empty and every broker again: a new cluster with the same
// addresses, cluster name and bucket, which knows nothing but the bucket.
func startEmptyCluster(c *Cluster) {
	c.t.Helper()
	c.KillEtcd()
	c.WipeEtcd()
	brokers := c.Brokers()
	for _, b := range brokers {
		c.Wipe(b.ID)
	}
	c.RestartEtcd()
	for _, b := range brokers {
		c.Restart(b.ID)
	}
	// restore's default replication factor is min(3, live brokers): wait
	// until broker 1, which restore asks, sees them all.
	c.WaitFor("every broker registered in the new cluster", electionTimeout, func() (bool, string) {
		resp, err := c.Metadata(context.Background(), 1)
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Brokers) == len(brokers), fmt.Sprintf("%d brokers", len(resp.Brokers))
	})
}

// restoreFromBucket runs `strata restore` into the new cluster, as of the
// disaster's time or of the bucket's end.
func restoreFromBucket(t *testing.T, c *Cluster, disaster time.Time, asOf bool) {
	t.Helper()
	args := []string{"restore", "--object-store", c.ObjectStore, "--cluster", "cluster",
		"--http", c.Broker(1).HTTPAddr, "--brokers", strings.Join(c.Addrs(), ",")}
	if asOf {
		args = append(args, "--as-of", disaster.UTC().Format(time.RFC3339Nano))
	}
	start := time.Now()
	out, err := c.runStrata(restoreTimeout, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("strata %s (%v):\n%s", strings.Join(args[:1], " "), time.Since(start).Round(time.Millisecond), out)
}

// readRestored reads every partition of topic from the new cluster, from
// its log start to its end, as a consumer would.
func readRestored(t *testing.T, c *Cluster, topic string, partitions int32) (starts, ends map[int32]int64, records map[int32][]history.Record) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	c.WaitFor(fmt.Sprintf("the restored %s's offsets listed", topic), restoredReadTimeout, func() (bool, string) {
		var err error
		starts, ends, err = listBounds(adm, topic, partitions)
		return err == nil, fmt.Sprint(err)
	})
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().At(starts[p])
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), restoredReadTimeout)
	defer cancel()
	records = map[int32][]history.Record{}
	for !readUpTo(records, ends) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the restored %s: not every partition read to its end %v within %v: %v", topic, ends, restoredReadTimeout, fetches.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				records[r.Partition] = append(records[r.Partition], history.Record{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	return starts, ends, records
}

// readUpTo says every partition with records was read to its end.
func readUpTo(records map[int32][]history.Record, ends map[int32]int64) bool {
	for p, end := range ends {
		if n := len(records[p]); end > 0 && (n == 0 || records[p][n-1].Offset < end-1) {
			return false
		}
	}
	return true
}

// checkRestoredRecords compares the restored log with the acknowledgements
// directly: each partition is one gapless run of offsets from 0 holding
// the producer's records in send order; every acknowledged record due
// (acknowledged before due) is there, at its offset; and a later one, if
// there, is at its offset too (the restored log is a prefix of the old).
func checkRestoredRecords(t *testing.T, acked []ackedRecord, starts, ends map[int32]int64, restored map[int32][]history.Record,
	due, disaster time.Time) {
	t.Helper()
	at := map[bucketPosition]string{}
	for p, records := range restored {
		checkGaplessInOrder(t, p, starts[p], ends[p], records)
		for _, r := range records {
			at[bucketPosition{p, r.Offset}] = r.Value
		}
	}
	var lost []string
	dueCount, lateCount, lateRestored := 0, 0, 0
	var recoveryPoint time.Duration // how long before the disaster the oldest record not restored was acknowledged
	for _, r := range acked {
		got, ok := at[bucketPosition{r.Partition, r.Offset}]
		if ok && got != r.Value {
			t.Errorf("p%d@%d: restored %.20q, acknowledged %.20q", r.Partition, r.Offset, got, r.Value)
		}
		if !ok {
			recoveryPoint = max(recoveryPoint, disaster.Sub(r.AckedAt))
		}
		if r.AckedAt.Before(due) {
			dueCount++
			if !ok {
				lost = append(lost, fmt.Sprintf("p%d@%d (acknowledged %v before the cutoff)", r.Partition, r.Offset, due.Sub(r.AckedAt).Round(time.Millisecond)))
			}
			continue
		}
		lateCount++
		if ok {
			lateRestored++
		}
	}
	t.Logf("acknowledged %d records: %d more than bound+%v before the disaster (all must be restored), of the %d after that %d were restored; "+
		"the oldest acknowledged record not restored was acknowledged %v before the disaster; restored ends %v",
		len(acked), dueCount, drillMargin, lateCount, lateRestored, recoveryPoint.Round(time.Millisecond), ends)
	if len(lost) > 0 {
		t.Errorf("%d records acknowledged more than bound+%v before the disaster were not restored, e.g. %s",
			len(lost), drillMargin, strings.Join(lost[:min(5, len(lost))], "; "))
	}
	if dueCount == 0 {
		t.Errorf("no record was acknowledged more than bound+%v before the disaster: nothing was tested", drillMargin)
	}
}

// checkGaplessInOrder: the partition's records are offsets 0..end-1, each
// once (the topic has no retention cut and no transactions), and the
// producer's sequence numbers rise with the offsets: nothing acknowledged
// or not appears twice or out of order.
func checkGaplessInOrder(t *testing.T, p int32, start, end int64, records []history.Record) {
	t.Helper()
	if start != 0 {
		t.Errorf("p%d: restored log starts at %d, want 0 (the bucket holds the partition from its first record)", p, start)
	}
	lastSeq := -1
	for i, r := range records {
		if want := start + int64(i); r.Offset != want {
			t.Errorf("p%d: restored offset %d where %d was expected (a hole or a repeat)", p, r.Offset, want)
			return
		}
		seq := timedSeq(r.Value)
		if seq <= lastSeq {
			t.Errorf("p%d@%d: producer sequence %d after %d: duplicated or reordered", p, r.Offset, seq, lastSeq)
			return
		}
		lastSeq = seq
	}
	if int64(len(records)) != end-start {
		t.Errorf("p%d: %d records restored in [%d, %d)", p, len(records), start, end)
	}
}

// checkRestoredHistory runs the history checker over the old cluster's
// produce history and the restored log as the final read. Records
// acknowledged after due count as unknown (the bound allows losing them),
// and the old consumer's observations and commits are left out (they may
// rightly be past what the bucket held): what remains are the checker's
// lost-write, duplicate, inconsistent-offsets, reorder and phantom-write
// rules.
func checkRestoredHistory(t *testing.T, h *history.History, acked []ackedRecord, starts map[int32]int64,
	restored map[int32][]history.Record, due time.Time) {
	t.Helper()
	late := map[string]bool{}
	for _, r := range acked {
		if !r.AckedAt.Before(due) {
			late[r.Value] = true
		}
	}
	in := h.Snapshot()
	in.Observations, in.Commits = nil, nil
	for i := range in.Attempts {
		if a := &in.Attempts[i]; a.Outcome == history.Acked && late[a.Value] {
			a.Outcome = history.Unknown
		}
	}
	in.Final = map[int32]history.FinalLog{}
	for p := int32(0); p < drillPartitions; p++ {
		in.Final[p] = history.FinalLog{LogStart: starts[p], Records: restored[p]}
	}
	rep := history.Check(in)
	t.Logf("history of the restored log: %s", rep.Stats)
	if err := rep.Err(); err != nil {
		t.Errorf("history checker: %v", err)
	}
}

// checkRestoredGroup: the group's offsets in the new cluster are, per
// partition, at least what the group had committed more than
// bound+drillMargin before the disaster, and within the restored log.
func checkRestoredGroup(t *testing.T, c *Cluster, g *committingGroup, ends map[int32]int64, due, disaster time.Time) {
	t.Helper()
	want := g.committedBy(due)
	if len(want) != drillPartitions {
		t.Fatalf("the group had committed %d of %d partitions more than bound+%v before the disaster: %v",
			len(want), drillPartitions, drillMargin, want)
	}
	got := fetchGroupOffsets(t, c, drillGroup, drillTopic)
	var lines []string
	for p := int32(0); p < drillPartitions; p++ {
		restoredAt, ok := got[p]
		switch {
		case !ok:
			t.Errorf("p%d: no restored offset for group %s; it had committed %d", p, drillGroup, want[p].Offset)
		case restoredAt < want[p].Offset:
			t.Errorf("p%d: group %s restored at %d, below the %d it had committed %v before the disaster",
				p, drillGroup, restoredAt, want[p].Offset, disaster.Sub(want[p].At).Round(time.Millisecond))
		case restoredAt > ends[p]:
			t.Errorf("p%d: group %s restored at %d, past the restored end %d", p, drillGroup, restoredAt, ends[p])
		}
		lines = append(lines, fmt.Sprintf("p%d restored %d (committed %v before the disaster: %d; restored end %d)",
			p, restoredAt, drillBound+drillMargin, want[p].Offset, ends[p]))
	}
	t.Logf("group %s: %s", drillGroup, strings.Join(lines, "; "))
}

// fetchGroupOffsets reads the group's committed offsets of topic from the
// new cluster, retrying while its coordinator loads.
func fetchGroupOffsets(t *testing.T, c *Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	out := map[int32]int64{}
	c.WaitFor("the restored group's offsets", restoredGroupWait, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), commitReadTimeout)
		defer cancel()
		resp, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.At >= 0 {
				out[o.Partition] = o.At
			}
		})
		return true, ""
	})
	return out
}
