package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/test/history"
)

// The soak's topics, groups and load.
const (
	soakIdemTopic      = "soak-idem" // idempotent producers, partition readers, both consumer groups
	soakIdemPartitions = 6
	soakTxnTopic       = "soak-txn" // transactional producers, a read_committed reader
	soakTxnPartitions  = 3
	soakProducers      = 2   // idempotent
	soakProducerRate   = 150 // records per second per idempotent producer
	soakTxnProducers   = 2
	soakGroupMembers   = 2 // per group
	soakClassicGroup   = "soak-classic"
	soakConsumerGroup  = "soak-consumer"

	// soakFinishBudget bounds setup plus the finish (repairs, catch-up,
	// final reads, checks): go test's -timeout must leave it after the soak.
	soakFinishBudget = 15 * time.Minute
	finalTxnReadTime = 90 * time.Second // an abandoned transaction aborts after txnTimeout
)

// soakTopicConfigs make segments small and the local log short, so that
// segments are tiered to MinIO all along (MinIO outages stall uploads) and
// the final reads from offset 0 are served partly from the bucket.
var soakTopicConfigs = map[string]string{
	"internal.segment.bytes": "65536",
	"local.retention.bytes":  "262144",
	"retention.ms":           "-1",
}

// soakSettings are the soak's environment: STRATA_SOAK (a duration; unset:
// no soak) and STRATA_SOAK_SEED (default: the clock).
type soakSettings struct {
	duration time.Duration
	seed     int64
}

// soakFromEnv reads the settings; ok is false when STRATA_SOAK is unset.
func soakFromEnv(getenv func(string) string) (s soakSettings, ok bool, err error) {
	raw := getenv("STRATA_SOAK")
	if raw == "" {
		return s, false, nil
	}
	if s.duration, err = time.ParseDuration(raw); err != nil || s.duration <= 0 {
		return s, false, fmt.Errorf("STRATA_SOAK=%q: want a positive duration such as 30m", raw)
	}
	s.seed = time.Now().UnixNano()
	if rawSeed := getenv("STRATA_SOAK_SEED"); rawSeed != "" {
		if s.seed, err = strconv.ParseInt(rawSeed, 10, 64); err != nil {
			return s, false, fmt.Errorf("STRATA_SOAK_SEED=%q: want an integer", rawSeed)
		}
	}
	return s, true, nil
}

func TestSoakFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if _, ok, err := soakFromEnv(env(nil)); ok || err != nil {
		t.Fatalf("unset: ok %v err %v", ok, err)
	}
	s, ok, err := soakFromEnv(env(map[string]string{"STRATA_SOAK": "30m", "STRATA_SOAK_SEED": "-42"}))
	if !ok || err != nil || s.duration != 30*time.Minute || s.seed != -42 {
		t.Fatalf("30m, seed -42: %+v %v %v", s, ok, err)
	}
	for _, bad := range []map[string]string{{"STRATA_SOAK": "1"}, {"STRATA_SOAK": "-1m"}, {"STRATA_SOAK": "1m", "STRATA_SOAK_SEED": "x"}} {
		if _, _, err := soakFromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestSoak is the soak mode (see doc.go): STRATA_SOAK=30m runs it for 30
// minutes. Opt-in, so it skips otherwise, in CI too.
func TestSoak(t *testing.T) {
	s, ok, err := soakFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("soak mode is opt-in: set STRATA_SOAK to a duration (e.g. STRATA_SOAK=30m) to run it; STRATA_SOAK_SEED=<n> replays a seed")
	}
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < s.duration+soakFinishBudget {
		t.Fatalf("go test -timeout leaves %v, want at least STRATA_SOAK (%v) + %v: pass -timeout %v",
			time.Until(deadline).Round(time.Second), s.duration, soakFinishBudget, (s.duration + soakFinishBudget + time.Minute).Round(time.Minute))
	}
	t.Logf("soak: %v, seed %d (STRATA_SOAK_SEED=%d replays the fault schedule, the transactions' decisions and the groups' member changes)", s.duration, s.seed, s.seed)
	runSoak(t, s)
}

// soakRun is one soak: the cluster, the workloads and the observers.
type soakRun struct {
	t        *testing.T
	c        *Cluster
	w        *Workload // idempotent producers and partition readers of soakIdemTopic
	groups   []*soakGroup
	commits  *commitReader
	txnH     *history.History
	txns     []*txnProducer
	readerRC *committedReader
	leaders  *leaderWatch
	watched  map[string][]int32
	faults   *faultInjector
}

func runSoak(t *testing.T, s soakSettings) {
	r := startSoak(t, s.seed)
	r.w.WaitAcked(200, progressTimeout)
	start := time.Now()
	r.faults.run(start.Add(s.duration))
	t.Logf("soak: faults stopped after %v; finishing", time.Since(start).Round(time.Second))
	idem, txn := r.finish()
	r.report(s, idem, txn)
}

func startSoak(t *testing.T, seed int64) *soakRun {
	c := Start(t, Config{MinIO: true, LogLevel: "info", ExtraArgs: []string{
		"--tier-upload-interval", "250ms", "--log-retention-check-interval", "1s",
		"--group-consumer-heartbeat-interval", "1s", "--group-consumer-session-timeout", "20s"}})
	replicatedTopic(t, c, soakIdemTopic, soakIdemPartitions, soakTopicConfigs)
	replicatedTopic(t, c, soakTxnTopic, soakTxnPartitions, soakTopicConfigs)
	r := &soakRun{t: t, c: c, txnH: history.New()}
	r.w = c.StartWorkload(WorkloadConfig{Topic: soakIdemTopic, Partitions: soakIdemPartitions, Producers: soakProducers,
		Consumers: 1, Rate: soakProducerRate, ValueSize: 100})
	r.groups = []*soakGroup{
		startSoakGroup(c, r.w.H, soakIdemTopic, soakClassicGroup, classicProtocol, soakGroupMembers, 0, seed),
		startSoakGroup(c, r.w.H, soakIdemTopic, soakConsumerGroup, consumerProtocol, soakGroupMembers, 1, seed),
	}
	r.commits = startCommitReader(c, r.w.H, soakIdemTopic, soakClassicGroup, soakConsumerGroup)
	for i := 0; i < soakTxnProducers; i++ {
		r.txns = append(r.txns, startTxnProducer(c, r.txnH, soakTxnTopic, soakTxnPartitions, i, seed))
	}
	r.readerRC = startCommittedReader(c, r.txnH, soakTxnTopic, soakTxnPartitions)
	r.watched = r.watchedPartitions()
	r.leaders = startLeaderWatch(c, r.watched)
	r.faults = newFaultInjector(c, seed, r.inSync)
	return r
}

// watchedPartitions are the data partitions and the coordinator partitions
// of the groups and transactional ids (same hash and default count of 50).
func (r *soakRun) watchedPartitions() map[string][]int32 {
	w := map[string][]int32{soakIdemTopic: nil, soakTxnTopic: nil}
	for p := int32(0); p < soakIdemPartitions; p++ {
		w[soakIdemTopic] = append(w[soakIdemTopic], p)
	}
	for p := int32(0); p < soakTxnPartitions; p++ {
		w[soakTxnTopic] = append(w[soakTxnTopic], p)
	}
	for _, g := range []string{soakClassicGroup, soakConsumerGroup} {
		w["__consumer_offsets"] = append(w["__consumer_offsets"], txnStatePartition(g))
	}
	for _, tp := range r.txns {
		w[txnStateTopic] = append(w[txnStateTopic], txnStatePartition(tp.id))
	}
	return w
}

// inSync says every watched partition that exists has a leader and all
// three replicas in sync, as one up broker sees it.
func (r *soakRun) inSync() (bool, string) {
	up := r.c.Up()
	if len(up) == 0 {
		return false, "no broker up"
	}
	resp, err := r.c.Metadata(context.Background(), up[0], sortedKeys(r.watched)...)
	if err != nil {
		return false, err.Error()
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil {
			continue // a coordinator topic not created yet
		}
		for _, p := range t.Partitions {
			if slices.Contains(r.watched[*t.Topic], p.Partition) && (p.Leader < 0 || len(p.ISR) < 3) {
				return false, fmt.Sprintf("%s-%d: leader %d epoch %d ISR %v (from broker %d)", *t.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, up[0])
			}
		}
	}
	return true, ""
}

// finish stops the workloads in an order that lets each reader reach the
// end of what was written, records the final reads and returns both
// histories' reports. Incomplete phases fail the test but the reports are
// still made.
func (r *soakRun) finish() (idem, txn history.Report) {
	t := r.t
	r.c.WaitFor("every watched partition in sync after the faults", isrTimeout, r.inSync)
	for _, tp := range r.txns {
		tp.finish()
	}
	for _, g := range r.groups {
		g.stopChurn() // a stable membership catches up sooner
	}
	ends, err := r.w.Drain()
	if err != nil {
		t.Errorf("idempotent workload: %v", err)
	}
	if ends != nil {
		if err := r.commits.waitCaughtUp(ends, groupCatchUpTimeout); err != nil {
			t.Errorf("consumer groups: %v", err)
		}
	}
	for _, g := range r.groups {
		g.close()
	}
	if err := r.commits.readFinal(progressTimeout); err != nil {
		t.Errorf("consumer groups: %v", err)
	}
	r.readerRC.finish()
	if err := readCommittedFinal(r.c, r.txnH, soakTxnTopic, soakTxnPartitions, finalTxnReadTime); err != nil {
		t.Errorf("transactional topic: %v", err)
	}
	r.leaders.finish()
	return r.w.H.Check(), r.txnH.Check()
}

// report logs what the soak did and found, ending with one summary line,
// and fails the test on any anomaly.
func (r *soakRun) report(s soakSettings, idem, txn history.Report) {
	t, fi := r.t, r.faults
	t.Logf("soak: faults: %d (%s); longest gap between two %v (%d over %v); %d broker faults injected before all replicas were back in sync; slowest repair %v",
		fi.total(), fi.countsString(), fi.maxGap().Round(time.Millisecond), fi.late, maxFaultGap, fi.unsynced, fi.slowRepair.Round(time.Millisecond))
	t.Logf("soak: leaders: %d elections; %s", r.leaders.elections(), r.leaders)
	t.Logf("soak: idempotent history (%s, groups %s and %s): %s", soakIdemTopic, soakClassicGroup, soakConsumerGroup, idem.Stats)
	for _, g := range r.groups {
		t.Logf("soak: %s", g)
	}
	t.Logf("soak: %s", r.commits)
	t.Logf("soak: transactional history (%s, read_committed): %s; live reader saw %d records", soakTxnTopic, txn.Stats, r.readerRC.records.Load())
	for _, tp := range r.txns {
		t.Logf("soak: %s", tp)
	}
	t.Logf("soak: tiering: %s", r.tierEvidence())
	anomalies := total(idem.Counts) + total(txn.Counts)
	t.Logf("soak summary: seed=%d duration=%v faults=%d [%s] leader-failovers=%d acked=%d [idempotent=%d transactional-committed=%d] anomalies=%d [%s]",
		s.seed, s.duration, fi.total(), fi.countsString(), r.leaders.elections(),
		idem.Stats.Acked+txn.Stats.CommittedRecords, idem.Stats.Acked, txn.Stats.CommittedRecords, anomalies, kindsString(idem, txn))
	for name, rep := range map[string]history.Report{"idempotent": idem, "transactional": txn} {
		if err := rep.Err(); err != nil {
			t.Errorf("%s history (seed %d): %v", name, s.seed, err)
		}
	}
}

// tierEvidence says how much of the soak went through MinIO: the objects in
// the bucket and the brokers' reads from it.
func (r *soakRun) tierEvidence() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objects := 0
	for obj := range r.c.MinIO.Client().ListObjects(ctx, r.c.MinIO.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			return fmt.Sprintf("listing the bucket: %v", obj.Err)
		}
		objects++
	}
	var coldGets float64
	for _, b := range r.c.Brokers() {
		n, err := b.MetricSum(ctx, "strata_cold_gets_total")
		if err != nil {
			return fmt.Sprintf("%d objects in the bucket; broker %d metrics: %v", objects, b.ID, err)
		}
		coldGets += n
	}
	return fmt.Sprintf("%d objects in the bucket; %.0f cold GETs by the brokers since their last start", objects, coldGets)
}

func total(counts map[history.Kind]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// kindsString lists the anomaly kinds found in either report ("none").
func kindsString(reports ...history.Report) string {
	var parts []string
	for _, k := range history.Kinds {
		n := 0
		for _, r := range reports {
			n += r.Counts[k]
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
