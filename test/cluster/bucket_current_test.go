package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/tier/objstore"
)

// The trickle test's topics, load and margins.
const (
	trickleTopic      = "trickle" // 10 records/s per partition
	idleTopic         = "idle"    // created with the other, never written
	trickleGroup      = "trickle-group"
	bucketPartitions  = 6
	trickleRate       = 10  // records per second per partition
	trickleValueSize  = 100 // bytes per value
	offsetsTopicName  = "__consumer_offsets"
	bucketSampleEvery = 10 * time.Second
	// presenceMargin: a record acknowledged more than bound+presenceMargin
	// before a sample started must be in that sample's replay (the bound,
	// plus time for the upload and its manifest commit).
	presenceMargin = 10 * time.Second
	// statusMargin: no leader may report a bucketLagMs above bound+statusMargin.
	statusMargin = 10 * time.Second
	// idleQuietAfter: the idle topic may write to the bucket while it is
	// created; from then on, nothing.
	idleQuietAfter = time.Minute
	// bucketSetupBudget is what the test needs beyond the sampling window
	// (cluster start, topics, finish); go test's -timeout must leave it.
	bucketSetupBudget = 3 * time.Minute
)

// bucketCurrentSettings are the test's environment: STRATA_BUCKET_SAMPLE
// (the sampling window, default 90s) and STRATA_BUCKET_BOUND (the brokers'
// --tier-upload-max-lag, default 10s).
type bucketCurrentSettings struct {
	window, bound time.Duration
}

func bucketCurrentFromEnv(getenv func(string) string) (s bucketCurrentSettings, err error) {
	if s.window, err = durationFromEnv(getenv, "STRATA_BUCKET_SAMPLE", 90*time.Second); err != nil {
		return s, err
	}
	if s.bound, err = durationFromEnv(getenv, "STRATA_BUCKET_BOUND", 10*time.Second); err != nil {
		return s, err
	}
	if s.bound < time.Second {
		return s, fmt.Errorf("STRATA_BUCKET_BOUND=%v: the brokers take at least 1s", s.bound)
	}
	return s, nil
}

// TestBucketCurrentUnderTrickle (tier.upload.max.lag.ms acceptance): with
// default segment sizes, a topic written at a trickle would keep its
// records in an active segment for hours; the bound makes the leader roll
// and upload it, so that the bucket alone (`strata replay`, no broker)
// holds every record acknowledged more than the bound ago. Sampled every
// 10 s over STRATA_BUCKET_SAMPLE: what replay shows against what the
// producer was told, each leader's reported bucket lag, and what the bound
// costs in PUTs, for the trickle topic and for an idle one (which must
// cost nothing).
func TestBucketCurrentUnderTrickle(t *testing.T) {
	defer timed(t, "TestBucketCurrentUnderTrickle")()
	settings, err := bucketCurrentFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < settings.window+bucketSetupBudget {
		t.Fatalf("go test -timeout leaves %v, want STRATA_BUCKET_SAMPLE (%v) + %v", time.Until(deadline).Round(time.Second),
			settings.window, bucketSetupBudget)
	}
	t.Logf("bound (--tier-upload-max-lag) %v, sampling window %v, a sample every %v", settings.bound, settings.window, bucketSampleEvery)
	// Merging runs within the window too: the replay samples then read a
	// bucket whose small objects are being merged (a short local retention
	// puts them below the leaders' local log start, where merges happen).
	c := Start(t, Config{MinIO: true, LogLevel: "info", ExtraArgs: []string{"--tier-upload-max-lag", settings.bound.String(),
		"--tier-merge-interval", "5s", "--tier-merge-grace", "20s", "--log-retention-check-interval", "5s"}})
	replicatedTopic(t, c, idleTopic, bucketPartitions, nil)
	idleCreated := time.Now()
	replicatedTopic(t, c, trickleTopic, bucketPartitions, map[string]string{"local.retention.ms": "15000"})

	p := startTimedProducer(c, nil, trickleTopic, bucketPartitions, trickleRate, trickleValueSize)
	g := startCommittingGroup(c, trickleGroup, trickleTopic)
	s := &bucketSampler{t: t, c: c, topic: trickleTopic, bound: settings.bound, p: p,
		firstSeen: map[bucketPosition]time.Time{}, statusMax: map[string]int64{}}
	cost := startPutMeter(t, c)
	idle := idlePutWatch{created: idleCreated}
	s.runWindow(settings.window, func() { idle.maybeBaseline(t, c) })

	if err := g.finish(); err != nil {
		t.Errorf("consumer group: %v", err)
	}
	if err := p.finish(); err != nil {
		t.Errorf("producer: %v", err)
	}
	t.Logf("producer: %v; %v", p, g)
	s.reportLag()
	s.reportStatus()
	cost.report(t, c)
	idle.check(t, c)
	logObjects(t, c, trickleTopic, idleTopic, offsetsTopicName)
	checkMerged(t, c, settings.window)
}

// checkMerged: once the window is long enough for objects to pass the
// merge grace below the local log start, the small objects were merged
// (and the samples above kept reading every record meanwhile).
func checkMerged(t *testing.T, c *Cluster, window time.Duration) {
	t.Helper()
	in, errIn := c.metricOverBrokers("strata_tier_events_total", map[string]string{"event": "objects_merged_in"})
	out, errOut := c.metricOverBrokers("strata_tier_events_total", map[string]string{"event": "objects_merged_out"})
	if err := errors.Join(errIn, errOut); err != nil {
		t.Errorf("merge counters: %v", err)
		return
	}
	t.Logf("merging: %.0f small objects merged into %.0f", in, out)
	if window >= time.Minute && (out == 0 || in <= out) {
		t.Errorf("no small objects merged in a %v window: %.0f into %.0f", window, in, out)
	}
}

// bucketPosition is one (partition, offset).
type bucketPosition struct {
	partition int32
	offset    int64
}

// bucketSampler compares the bucket, one replay at a time, with what the
// producer was told, and reads every leader's bucket lag at the same time.
// Owned by the test goroutine.
type bucketSampler struct {
	t     *testing.T
	c     *Cluster
	topic string
	bound time.Duration
	p     *timedProducer

	// firstSeen is the start of the first replay that printed a position.
	firstSeen  map[bucketPosition]time.Time
	samples    int
	lastStart  time.Time // of the last sample
	lastReport string    // replay's stderr of the last sample
	// statusMax is the largest bucketLagMs a leader reported, per topic.
	statusMax map[string]int64
}

// runWindow samples every bucketSampleEvery for window (both ends
// included), calling between after each sample.
func (s *bucketSampler) runWindow(window time.Duration, between func()) {
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * bucketSampleEvery)
		if at.Sub(start) > window {
			return
		}
		time.Sleep(time.Until(at))
		s.sample()
		between()
	}
}

// sample runs one replay of the whole topic and checks it.
func (s *bucketSampler) sample() {
	s.t.Helper()
	start := time.Now()
	bucket, report, err := s.c.replayBucket(s.topic)
	if err != nil {
		s.t.Fatal(err)
	}
	took := time.Since(start)
	s.samples++
	s.lastStart, s.lastReport = start, report
	s.markSeen(bucket, start)
	acked := s.p.acked()
	missing := s.checkPresent(bucket, acked, start)
	worstLeader := s.checkStatus(missingAges(bucket, acked, start))
	n := 0
	for _, records := range bucket {
		n += len(records)
	}
	s.t.Logf("sample %d: replay printed %d records in %v; %d acknowledged; oldest acknowledged record not in the bucket: %v; "+
		"missing past bound+%v: %d; largest leader bucketLagMs: %s",
		s.samples, n, took.Round(time.Millisecond), len(acked), recoveryPointAge(bucket, acked, start).Round(time.Millisecond),
		presenceMargin, missing, worstLeader)
}

// markSeen notes the first sample that showed each position. A sample's
// time is its replay's start: every object listed was in the bucket by the
// end of the listing, a moment later, so a record is dated at most that
// moment early and never late.
func (s *bucketSampler) markSeen(bucket map[int32]map[int64]string, start time.Time) {
	for p, records := range bucket {
		for offset := range records {
			pos := bucketPosition{p, offset}
			if _, ok := s.firstSeen[pos]; !ok {
				s.firstSeen[pos] = start
			}
		}
	}
}

// checkPresent fails the test for each acknowledged record acknowledged
// more than bound+presenceMargin before start that the replay lacks, and
// for any acknowledged offset the replay shows with another value. It
// returns how many were missing.
func (s *bucketSampler) checkPresent(bucket map[int32]map[int64]string, acked []ackedRecord, start time.Time) int {
	s.t.Helper()
	due := start.Add(-(s.bound + presenceMargin))
	var missing, wrong []string
	for _, r := range acked {
		got, ok := bucket[r.Partition][r.Offset]
		switch {
		case ok && got != r.Value:
			wrong = append(wrong, fmt.Sprintf("p%d@%d holds %.20q, acknowledged %.20q", r.Partition, r.Offset, got, r.Value))
		case !ok && r.AckedAt.Before(due):
			missing = append(missing, fmt.Sprintf("p%d@%d acknowledged %v before the sample", r.Partition, r.Offset,
				start.Sub(r.AckedAt).Round(time.Millisecond)))
		}
	}
	if len(missing) > 0 {
		s.t.Errorf("sample %d: %d records acknowledged more than bound+%v before the sample are not in the bucket, e.g. %s",
			s.samples, len(missing), presenceMargin, strings.Join(missing[:min(5, len(missing))], "; "))
	}
	if len(wrong) > 0 {
		s.t.Errorf("sample %d: %d acknowledged offsets hold another value in the bucket, e.g. %s",
			s.samples, len(wrong), strings.Join(wrong[:min(5, len(wrong))], "; "))
	}
	return len(missing)
}

// recoveryPointAge is how old, at start, the oldest acknowledged record
// missing from the bucket was (over the partitions; 0 if none): what a
// disaster at start would have lost, measured from the producer's side.
func recoveryPointAge(bucket map[int32]map[int64]string, acked []ackedRecord, start time.Time) time.Duration {
	var oldest time.Duration
	for _, age := range missingAges(bucket, acked, start) {
		oldest = max(oldest, age)
	}
	return oldest
}

// missingAges is recoveryPointAge per partition (partitions with nothing
// missing are absent).
func missingAges(bucket map[int32]map[int64]string, acked []ackedRecord, start time.Time) map[int32]time.Duration {
	out := map[int32]time.Duration{}
	for _, r := range acked {
		if _, ok := bucket[r.Partition][r.Offset]; !ok && r.AckedAt.Before(start) {
			out[r.Partition] = max(out[r.Partition], start.Sub(r.AckedAt))
		}
	}
	return out
}

// checkStatus reads every broker's /v1/tier/status: no partition's leader
// may report a bucket lag above bound+statusMargin, and the bound must be
// the brokers' default for the test's topics and __consumer_offsets (the
// bound applies to every tiered topic). It returns the worst leader lag.
// replayed holds, per partition of the sampled topic, what this sample's
// replay showed (missingAges): a failure names it, so that a status
// contradicting the bucket itself is told from a bucket really behind.
func (s *bucketSampler) checkStatus(replayed map[int32]time.Duration) string {
	s.t.Helper()
	limit := (s.bound + statusMargin).Milliseconds()
	worst := "none"
	var worstLag int64 = -1
	for _, b := range s.c.Brokers() {
		list, err := bucketStatusOf(b)
		if err != nil {
			s.t.Errorf("sample %d: %v", s.samples, err)
			continue
		}
		for _, st := range list {
			if !st.Leader {
				continue
			}
			s.statusMax[st.Topic] = max(s.statusMax[st.Topic], st.BucketLagMs)
			if st.BucketLagMs > worstLag {
				worstLag, worst = st.BucketLagMs, fmt.Sprintf("%d ms (%s-%d on broker %d)", st.BucketLagMs, st.Topic, st.Partition, b.ID)
			}
			if st.BucketLagMs > limit {
				evidence := ""
				if st.Topic == s.topic {
					evidence = fmt.Sprintf("; this sample's replay: the oldest acknowledged record of the partition missing from the bucket was %v old",
						replayed[st.Partition].Round(time.Millisecond))
				}
				s.t.Errorf("sample %d: broker %d leads %s-%d with bucketLagMs %d > bound+%v (%d ms); %+v%s",
					s.samples, b.ID, st.Topic, st.Partition, st.BucketLagMs, statusMargin, limit, st, evidence)
			}
			if boundApplies(st.Topic) && st.UploadMaxLagMs != s.bound.Milliseconds() {
				s.t.Errorf("sample %d: %s-%d reports uploadMaxLagMs %d, want the brokers' --tier-upload-max-lag %d",
					s.samples, st.Topic, st.Partition, st.UploadMaxLagMs, s.bound.Milliseconds())
			}
		}
	}
	s.checkLagMetric(limit)
	return worst
}

// checkLagMetric: each broker's strata_tier_bucket_lag_seconds_max (its
// worst led partition) stays within the same limit as the status.
func (s *bucketSampler) checkLagMetric(limitMs int64) {
	s.t.Helper()
	for _, b := range s.c.Brokers() {
		ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
		seconds, err := b.MetricSum(ctx, "strata_tier_bucket_lag_seconds_max")
		cancel()
		if err != nil {
			s.t.Errorf("sample %d: broker %d /metrics: %v", s.samples, b.ID, err)
			continue
		}
		if seconds*1000 > float64(limitMs) {
			s.t.Errorf("sample %d: broker %d strata_tier_bucket_lag_seconds_max %.3f > bound+%v", s.samples, b.ID, seconds, statusMargin)
		}
	}
}

func boundApplies(topic string) bool {
	return topic == trickleTopic || topic == idleTopic || topic == offsetsTopicName
}

// reportLag computes, for every record acknowledged more than
// bound+presenceMargin before the last sample (each was checked present
// there, so each has a first sighting), the time from its acknowledgement
// to the first replay that showed it, and asserts on its p99.
//
// What is measured: first sighting (a replay's start) minus the
// acknowledgement time. It overstates the time the record took to reach
// the bucket by the wait for the next sample, up to one sampling interval,
// and understates it by at most a replay's listing time. So a product that
// keeps its promise (every committed record in the bucket within the
// bound) measures at most bound + interval: that is the assertion, on p99
// so that a sample delayed by a slow replay does not decide it alone.
func (s *bucketSampler) reportLag() {
	s.t.Helper()
	due := s.lastStart.Add(-(s.bound + presenceMargin))
	var lags []time.Duration
	for _, r := range s.p.acked() {
		seen, ok := s.firstSeen[bucketPosition{r.Partition, r.Offset}]
		if !r.AckedAt.Before(due) || !ok {
			continue // too recent to be due, or already reported missing
		}
		lags = append(lags, max(0, seen.Sub(r.AckedAt)))
	}
	p50, p99, worst := percentiles(lags)
	s.t.Logf("bucket lag (acknowledgement to first replay showing the record) over %d records, %d samples: p50 %v, p99 %v, max %v",
		len(lags), s.samples, p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond))
	if len(lags) == 0 {
		s.t.Errorf("no record was due in the bucket by the last sample: the window is too short for bound %v", s.bound)
	}
	if limit := s.bound + bucketSampleEvery; p99 > limit {
		s.t.Errorf("bucket lag p99 %v > bound + sampling interval (%v)", p99, limit)
	}
	s.t.Logf("last replay's report:\n%s", s.lastReport)
}

func (s *bucketSampler) reportStatus() {
	s.t.Logf("largest bucketLagMs reported by a leader over the samples, per topic: %v", s.statusMax)
	if _, ok := s.statusMax[trickleTopic]; !ok {
		s.t.Errorf("no leader of %s reported its bucket lag in any sample", trickleTopic)
	}
}

// putMeter counts the object-store PUTs of the trickle topic over the
// sampling window, from every broker's counters.
type putMeter struct {
	start time.Time
	puts  float64
}

func startPutMeter(t *testing.T, c *Cluster) putMeter {
	t.Helper()
	return putMeter{start: time.Now(), puts: mustPuts(t, c, trickleTopic)}
}

func (m putMeter) report(t *testing.T, c *Cluster) {
	t.Helper()
	puts := mustPuts(t, c, trickleTopic) - m.puts
	elapsed := time.Since(m.start)
	rolled, err := c.metricOverBrokers("strata_tier_events_total", map[string]string{"event": "segments_rolled_for_bound"})
	if err != nil {
		t.Errorf("segments_rolled_for_bound: %v", err)
	}
	t.Logf("cost: %s: %.0f PUTs in %v = %.0f PUTs/hour (%.0f per partition-hour); segments rolled for the bound (all topics): %.0f",
		trickleTopic, puts, elapsed.Round(time.Second), puts/elapsed.Hours(), puts/elapsed.Hours()/bucketPartitions, rolled)
}

// mustPuts is the PUT requests for topic summed over the brokers.
func mustPuts(t *testing.T, c *Cluster, topic string) float64 {
	t.Helper()
	n, err := c.metricOverBrokers("strata_object_store_requests_total", map[string]string{"op": string(objstore.OpPut), "topic": topic})
	if err != nil {
		t.Fatalf("PUT count of %s: %v", topic, err)
	}
	return n
}

// idlePutWatch holds the idle topic's PUT count once it is idleQuietAfter
// old; from then on it must not move.
type idlePutWatch struct {
	created    time.Time
	baseline   float64
	baselineAt time.Time // zero until taken
}

func (w *idlePutWatch) maybeBaseline(t *testing.T, c *Cluster) {
	t.Helper()
	if w.baselineAt.IsZero() && time.Since(w.created) >= idleQuietAfter {
		w.baseline, w.baselineAt = mustPuts(t, c, idleTopic), time.Now()
	}
}

func (w *idlePutWatch) check(t *testing.T, c *Cluster) {
	t.Helper()
	now := mustPuts(t, c, idleTopic)
	if w.baselineAt.IsZero() {
		t.Logf("cost: %s: %.0f PUTs in all; the window ended before it was %v old, so its quiet is not asserted", idleTopic, now, idleQuietAfter)
		return
	}
	since := time.Since(w.baselineAt)
	t.Logf("cost: %s: %.0f PUTs in its first %v, %.0f in the %v after", idleTopic, w.baseline, idleQuietAfter, now-w.baseline, since.Round(time.Second))
	if now != w.baseline {
		t.Errorf("idle topic %s made %.0f PUTs in the %v after its first %v: an idle topic must cost nothing", idleTopic,
			now-w.baseline, since.Round(time.Second), idleQuietAfter)
	}
}

// logObjects logs the objects per partition each topic's leaders report
// (for __consumer_offsets, only the partitions holding any).
func logObjects(t *testing.T, c *Cluster, topics ...string) {
	for _, topic := range topics {
		status := c.leaderStatus(topic)
		partitions := make([]int32, 0, len(status))
		for p := range status {
			partitions = append(partitions, p)
		}
		slices.Sort(partitions)
		var parts []string
		for _, p := range partitions {
			if st := status[p]; st.Objects > 0 || topic != offsetsTopicName {
				parts = append(parts, fmt.Sprintf("p%d: %d objects, bucket end %d", p, st.Objects, st.BucketEnd))
			}
		}
		t.Logf("objects in the bucket, %s (%d partitions' leaders answered): %s", topic, len(status), strings.Join(parts, "; "))
	}
}
