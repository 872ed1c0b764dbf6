package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// TestKillLeaderRepeatedly: 3 brokers, RF 3,
// min.insync.replicas 2, an idempotent acks=all producer and two consumers
// under load; the leader of partition 0 is killed with SIGKILL 20 times
// (-short: 5) and restarted each time. The checker must find no lost,
// duplicated or reordered record, and nothing a consumer saw may disappear.
func TestKillLeaderRepeatedly(t *testing.T) {
	defer timed(t, "TestKillLeaderRepeatedly")()
	c := Start(t, Config{})
	const topic = "failover"
	replicatedTopic(t, c, topic, 3, nil)
	w := c.StartWorkload(WorkloadConfig{Topic: topic, Partitions: 3, Consumers: 2, Rate: 300})
	w.WaitAcked(200, progressTimeout)
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := 1; round <= rounds; round++ {
		done := timed(t, fmt.Sprintf("round %d", round))
		before := mustPartition(t, c, topic, 0)
		c.Kill(before.Leader)
		after := waitNewLeader(t, c, topic, 0, before.Leader, before.LeaderEpoch)
		t.Logf("round %d: leader %d (epoch %d) killed; new leader %d (epoch %d), ISR %v",
			round, before.Leader, before.LeaderEpoch, after.Leader, after.LeaderEpoch, after.ISR)
		c.Restart(before.Leader)
		for p := int32(0); p < 3; p++ {
			waitISR(t, c, topic, p, []int32{1, 2, 3}) // the next kill must not leave fewer than 2 in sync
		}
		w.WaitAcked(100, progressTimeout)
		done()
	}
	finishClean(t, w, 1000)
}

// TestCutLeaderFromPeers: the leader is cut off from
// its peers and etcd but not from clients. acks=all writes sent straight to
// it fail or time out, another broker takes over and the workload goes on;
// after Heal the old leader rejoins and no acknowledged write is lost.
func TestCutLeaderFromPeers(t *testing.T) {
	defer timed(t, "TestCutLeaderFromPeers")()
	c := Start(t, Config{})
	const topic = "cut"
	replicatedTopic(t, c, topic, 1, nil)
	w := c.StartWorkload(WorkloadConfig{Topic: topic, Partitions: 1, Rate: 200})
	w.WaitAcked(200, progressTimeout)
	before := mustPartition(t, c, topic, 0)
	direct := c.BrokerClient(before.Leader)
	c.Cut(before.Leader)

	produceToCut(t, c, w, direct, topic, "cut-first")
	after := waitNewLeader(t, c, topic, 0, before.Leader, before.LeaderEpoch)
	t.Logf("cut leader %d; new leader %d (epoch %d), ISR %v", before.Leader, after.Leader, after.LeaderEpoch, after.ISR)
	produceToCut(t, c, w, direct, topic, "cut-deposed")
	w.WaitAcked(200, progressTimeout)

	c.Heal(before.Leader)
	waitISRContains(t, c, topic, 0, before.Leader)
	w.WaitAcked(100, progressTimeout)
	finishClean(t, w, 500)
}

// produceToCut sends one acks=all write straight to the cut broker; it must
// not succeed. The attempt goes into the history (a failure before the
// append is Failed, anything else Unknown), so the checker also catches it
// if it shows up later.
func produceToCut(t *testing.T, c *Cluster, w *Workload, direct *kgo.Client, topic, value string) {
	t.Helper()
	w.H.Produce("direct", value, "", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	offset, err := c.ProduceDirect(ctx, direct, -1, 5*time.Second, topic, 0, value)
	switch {
	case err == nil:
		w.H.Ack(value, 0, offset)
		t.Errorf("acks=all write %q to the cut leader succeeded at offset %d", value, offset)
	case errors.Is(err, kerr.NotEnoughReplicas):
		w.H.Fail(value)
	default:
		w.H.Unknown(value)
	}
	t.Logf("acks=all write %q to the cut broker: %v", value, err)
}

// TestControlledShutdownHandsOver: SIGTERM on a leader moves its
// leaderships to other in-sync replicas before the process exits (the log
// says so, and the exit code is 0); the workload goes on and, after the
// broker is back, nothing acknowledged is missing.
func TestControlledShutdownHandsOver(t *testing.T) {
	defer timed(t, "TestControlledShutdownHandsOver")()
	c := Start(t, Config{})
	const topic = "handover"
	replicatedTopic(t, c, topic, 3, nil)
	w := c.StartWorkload(WorkloadConfig{Topic: topic, Partitions: 3, Rate: 300})
	w.WaitAcked(200, progressTimeout)
	before := mustPartition(t, c, topic, 0)
	if code := c.Shutdown(before.Leader, 45*time.Second); code != 0 {
		t.Fatalf("broker %d exited with %d after SIGTERM", before.Leader, code)
	}
	if log := c.Broker(before.Leader).Log(); !strings.Contains(log, "leadership handed over") {
		t.Fatalf("broker %d exited without handing leadership over; log tail:\n%s", before.Leader, testkit.Tail(log, 3000))
	}
	after := waitNewLeader(t, c, topic, 0, before.Leader, before.LeaderEpoch)
	t.Logf("SIGTERM to leader %d (epoch %d): new leader %d (epoch %d), ISR %v",
		before.Leader, before.LeaderEpoch, after.Leader, after.LeaderEpoch, after.ISR)
	w.WaitAcked(100, progressTimeout)
	c.Restart(before.Leader)
	for p := int32(0); p < 3; p++ {
		waitISR(t, c, topic, p, []int32{1, 2, 3})
	}
	finishClean(t, w, 300)
}
