package cluster

// Fault acceptance of diskless topics: kill -9 of a broker producers write
// through, a MinIO outage and etcd outages, each under idempotent acks=all
// producers in every zone. The history checker must find every
// acknowledged record exactly once; no producer may give a record up (every
// error the brokers answer during a fault is retriable); and every broker
// must serve the same log end afterwards (its index missed no commit).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/test/history"
)

const (
	disklessFaultTopic      = "diskless-faults"
	disklessFaultPartitions = 3
	disklessFaultZones      = 3
)

// startDisklessFaults starts three brokers, one zone each, with MinIO and a
// diskless topic of three partitions, and a workload on it: producer i and
// reader i are in zone rack(i+1), so each producer writes every partition
// through its own broker (the three commit to the same partitions at once)
// and each reader reads through its own. It returns once every broker has
// written shared objects.
func startDisklessFaults(t *testing.T) (*Cluster, *Workload) {
	t.Helper()
	c := Start(t, Config{MinIO: true, RackPerBroker: true, ExtraArgs: []string{"--diskless-append-linger", "50ms"}})
	c.CreateTopic(disklessFaultTopic, disklessFaultPartitions, 3, map[string]string{"diskless.enable": "true"})
	// Every broker serves every diskless partition, so a client that
	// failed over stays where it is until it next reads metadata: a short
	// max age brings it back to its zone's broker soon after a restart.
	zone := func(i int) []kgo.Opt { return []kgo.Opt{disklessZone(int32(i + 1)), kgo.MetadataMaxAge(time.Second)} }
	w := c.StartWorkload(WorkloadConfig{Topic: disklessFaultTopic, Partitions: disklessFaultPartitions,
		Producers: disklessFaultZones, Consumers: disklessFaultZones, Rate: 100, ProducerOpts: zone, ConsumerOpts: zone})
	w.WaitAcked(300, progressTimeout)
	for _, id := range c.Up() {
		c.WaitFor(fmt.Sprintf("broker %d writing its zone's shared objects", id), progressTimeout, func() (bool, string) {
			n := metric(t, c, id, "strata_diskless_objects_total")
			return n > 0, fmt.Sprintf("%v objects", n)
		})
	}
	return c, w
}

// metric is one broker's metric (every sample of name summed; name may
// carry labels, e.g. `strata_diskless_puts_total{result="error"}`).
func metric(t *testing.T, c *Cluster, id int32, name string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.Broker(id).MetricSum(ctx, name)
	if err != nil {
		t.Fatalf("broker %d: %s: %v", id, name, err)
	}
	return v
}

// metricOfUp sums a metric over the running brokers.
func metricOfUp(t *testing.T, c *Cluster, name string) float64 {
	t.Helper()
	var sum float64
	for _, id := range c.Up() {
		sum += metric(t, c, id, name)
	}
	return sum
}

// ackedBy counts the acknowledged records of one producer.
func ackedBy(w *Workload, producer string) int {
	n := 0
	for _, a := range w.H.Snapshot().Attempts {
		if a.Producer == producer && a.Outcome == history.Acked {
			n++
		}
	}
	return n
}

// waitProducerAcks waits until producer has n more acknowledged records.
func waitProducerAcks(t *testing.T, c *Cluster, w *Workload, producer string, n int, why string) {
	t.Helper()
	target := ackedBy(w, producer) + n
	c.WaitFor(fmt.Sprintf("%d more acknowledged records of %s (%s)", n, producer, why), progressTimeout, func() (bool, string) {
		got := ackedBy(w, producer)
		return got >= target, fmt.Sprintf("%d of %d; errors: %s", got, target, w.Errors())
	})
}

// waitFreshAcks waits until n records produced from now on are
// acknowledged: the cluster serves again after a fault (the backlog
// buffered during it, acknowledged at once, does not count).
func waitFreshAcks(t *testing.T, c *Cluster, w *Workload, n int) {
	t.Helper()
	from := len(w.H.Snapshot().Attempts)
	c.WaitFor(fmt.Sprintf("%d acknowledged records produced after the fault", n), progressTimeout, func() (bool, string) {
		acked := 0
		for _, a := range w.H.Snapshot().Attempts[from:] {
			if a.Outcome == history.Acked {
				acked++
			}
		}
		return acked >= n, fmt.Sprintf("%d; errors: %s", acked, w.Errors())
	})
}

// finishDisklessFaults stops the workload, reads every partition back,
// and fails t unless the history is clean, every attempt was acknowledged
// (producers retried through every fault; no error reached them), and
// every broker lists the same log ends (its index caught up).
func finishDisklessFaults(t *testing.T, c *Cluster, w *Workload, minAcked int) {
	t.Helper()
	waitBrokersReady(t, c)
	ends, err := w.Drain()
	if err != nil {
		t.Errorf("workload: %v", err)
	}
	rep := w.H.Check()
	t.Logf("history: %s; longest produce-to-ack %v", rep.Stats, w.MaxAckLatency().Round(time.Millisecond))
	if err := rep.Err(); err != nil {
		t.Errorf("history checker: %v", err)
	}
	if rep.Stats.Unknown > 0 || rep.Stats.Failed > 0 {
		t.Errorf("%d records not acknowledged: the producers were given up on them (errors: %s)",
			rep.Stats.Unknown+rep.Stats.Failed, w.Errors())
	}
	if rep.Stats.Acked < minAcked {
		t.Errorf("only %d acknowledged records, want at least %d (produce errors: %s)", rep.Stats.Acked, minAcked, w.Errors())
	}
	if ends != nil {
		checkEndsEverywhere(t, c, ends)
	}
}

// waitBrokersReady waits until every running broker's /readyz, which asks
// etcd, answers 200: a broker an outage cut off from etcd has reconnected
// (gRPC's backoff may hold it back for a while after a long or flapping
// outage) and its index follows the commits again.
func waitBrokersReady(t *testing.T, c *Cluster) {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	for _, id := range c.Up() {
		c.WaitFor(fmt.Sprintf("broker %d ready (reaching etcd)", id), readyTimeout, func() (bool, string) {
			resp, err := client.Get("http://" + c.Broker(id).HTTPAddr + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
	}
}

// checkEndsEverywhere: every running broker (asked through a client of its
// zone) lists the log ends the final read used.
func checkEndsEverywhere(t *testing.T, c *Cluster, want map[int32]int64) {
	t.Helper()
	for _, id := range c.Up() {
		adm := kadm.NewClient(c.Client(disklessZone(id)))
		c.WaitFor(fmt.Sprintf("broker %d listing the log ends %v", id, want), 15*time.Second, func() (bool, string) {
			_, ends, err := listBounds(adm, disklessFaultTopic, disklessFaultPartitions)
			if err != nil {
				return false, err.Error()
			}
			return fmt.Sprint(ends) == fmt.Sprint(want), fmt.Sprint(ends)
		})
	}
}

// TestDisklessFaultBrokerKill: the brokers two zones' producers write
// through are killed (-9) in turn, each held down until its zone's
// producer has failed over to another broker, then restarted; the
// restarted broker takes its zone's traffic back.
func TestDisklessFaultBrokerKill(t *testing.T) {
	defer timed(t, "TestDisklessFaultBrokerKill")()
	c, w := startDisklessFaults(t)
	for _, victim := range []int32{2, 3} {
		producer := fmt.Sprintf("producer%d", victim-1) // of zone rack<victim>
		c.Kill(victim)
		waitProducerAcks(t, c, w, producer, 100, fmt.Sprintf("failed over from the killed broker %d", victim))
		c.Restart(victim)
		c.WaitFor(fmt.Sprintf("the restarted broker %d writing its zone's objects", victim), progressTimeout, func() (bool, string) {
			n := metric(t, c, victim, "strata_diskless_objects_total")
			return n > 0, fmt.Sprintf("%v objects", n)
		})
		waitProducerAcks(t, c, w, producer, 100, fmt.Sprintf("through the restarted broker %d", victim))
	}
	finishDisklessFaults(t, c, w, 1000)
	if w.MaxAckLatency() < time.Second {
		t.Errorf("the longest produce-to-ack was %v: no producer waited for a killed broker", w.MaxAckLatency())
	}
}

// TestDisklessFaultMinIOOutage: MinIO is killed for longer than a PUT may
// take (its retries included), so shared objects fail to be written and
// produce requests time out, then restarted.
func TestDisklessFaultMinIOOutage(t *testing.T) {
	defer timed(t, "TestDisklessFaultMinIOOutage")()
	c, w := startDisklessFaults(t)
	c.KillMinIO()
	time.Sleep(12 * time.Second) // > diskless.DefaultPutTimeout
	c.RestartMinIO()
	waitFreshAcks(t, c, w, 300)
	putErrors := metricOfUp(t, c, `strata_diskless_puts_total{result="error"}`)
	t.Logf("%v failed PUTs of shared objects", putErrors)
	finishDisklessFaults(t, c, w, 1000)
	if putErrors == 0 {
		t.Errorf(`strata_diskless_puts_total{result="error"} is 0: no PUT failed during the outage`)
	}
	if w.MaxAckLatency() < 5*time.Second {
		t.Errorf("the longest produce-to-ack was %v: no producer waited for the bucket", w.MaxAckLatency())
	}
}

// TestDisklessFaultEtcdOutage: etcd is killed and restarted on its data;
// then every broker's link to etcd is blackholed for a while; then the
// links flap (cut and healed every few hundred milliseconds). A cut resets
// the commits in flight, some after etcd applied them: their producers'
// retries must be answered as duplicates with the original offsets
// (TestLostCommitAnswer in package diskless makes that case certain).
// Last, one broker is cut from etcd while etcd compacts its history, so
// that its index must reload instead of resuming its watch.
func TestDisklessFaultEtcdOutage(t *testing.T) {
	defer timed(t, "TestDisklessFaultEtcdOutage")()
	c, w := startDisklessFaults(t)
	c.KillEtcd()
	time.Sleep(6 * time.Second)
	c.RestartEtcd()
	waitFreshAcks(t, c, w, 300)

	c.CutEtcd()
	time.Sleep(5 * time.Second)
	c.HealEtcd()
	waitFreshAcks(t, c, w, 300)

	for i := 0; i < 10; i++ {
		c.CutEtcd()
		time.Sleep(time.Duration(100+30*i) * time.Millisecond)
		c.HealEtcd()
		time.Sleep(400 * time.Millisecond)
	}
	waitFreshAcks(t, c, w, 300)

	// Broker 2 is cut from etcd while the others commit and etcd compacts
	// its history: its watch cannot resume and its index must reload.
	c.Broker(2).EtcdProxy.Cut()
	waitFreshAcks(t, c, w, 300)
	c.CompactEtcd()
	c.Broker(2).EtcdProxy.Heal()
	c.WaitFor("broker 2 reloading its diskless index", readyTimeout, func() (bool, string) {
		return strings.Contains(c.Broker(2).Log(), "diskless index: etcd compacted"), "no reload in its log yet"
	})
	waitFreshAcks(t, c, w, 300)
	commitErrors := metricOfUp(t, c, `strata_diskless_commits_total{result="error"}`)
	t.Logf("%v failed commits, %v lost commit races", commitErrors, metricOfUp(t, c, `strata_diskless_commits_total{result="conflict"}`))
	finishDisklessFaults(t, c, w, 1200)
	if commitErrors == 0 {
		t.Errorf(`strata_diskless_commits_total{result="error"} is 0: no commit failed during the outages`)
	}
	if w.MaxAckLatency() < 3*time.Second {
		t.Errorf("the longest produce-to-ack was %v: no producer waited for etcd", w.MaxAckLatency())
	}
}
