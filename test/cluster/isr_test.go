package cluster

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStoppedFollowerLeavesAndRejoinsISR: SIGSTOP a
// follower: the ISR shrinks, the HW moves on and produce continues; SIGCONT:
// it catches up and rejoins the ISR; the history stays clean.
func TestStoppedFollowerLeavesAndRejoinsISR(t *testing.T) {
	defer timed(t, "TestStoppedFollowerLeavesAndRejoinsISR")()
	c := Start(t, Config{})
	const topic = "sigstop"
	replicatedTopic(t, c, topic, 1, nil)
	w := c.StartWorkload(WorkloadConfig{Topic: topic, Partitions: 1, Rate: 200})
	w.WaitAcked(100, progressTimeout)
	m := mustPartition(t, c, topic, 0)
	follower := followers(m)[0]
	c.Stop(follower)
	shrunk := m.ISR[:0:0]
	for _, id := range m.ISR {
		if id != follower {
			shrunk = append(shrunk, id)
		}
	}
	waitISR(t, c, topic, 0, shrunk)

	adm := c.Admin()
	hw := endOffset(t, c, adm, topic, 0)
	w.WaitAcked(200, progressTimeout)
	c.WaitFor("the HW to move on without the stopped follower", progressTimeout, func() (bool, string) {
		now := endOffset(t, c, adm, topic, 0)
		return now > hw, "HW still at " + itoa(now)
	})

	c.Cont(follower)
	waitISR(t, c, topic, 0, []int32{1, 2, 3})
	w.WaitAcked(100, progressTimeout)
	finishClean(t, w, 400)
}

// TestTwoOfThreeDown: with both followers killed the
// ISR shrinks to the leader; acks=all gets NOT_ENOUGH_REPLICAS, acks=1
// works; once both are back the ISR heals to all three and acks=all works.
func TestTwoOfThreeDown(t *testing.T) {
	defer timed(t, "TestTwoOfThreeDown")()
	c := Start(t, Config{})
	const topic = "twodown"
	replicatedTopic(t, c, topic, 1, nil)
	m := mustPartition(t, c, topic, 0)
	down := followers(m)
	for _, id := range down {
		c.Kill(id)
	}
	waitISR(t, c, topic, 0, []int32{m.Leader})

	direct := c.BrokerClient(m.Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if off, err := c.ProduceDirect(ctx, direct, -1, 5*time.Second, topic, 0, "acks-all-refused"); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR [%d] and min.insync.replicas 2: got offset %d, error %v; want NOT_ENOUGH_REPLICAS",
			m.Leader, off, err)
	}
	one := c.Client(kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err := produceSync(t, one, time.Minute, &kgo.Record{Partition: 0, Value: []byte("acks-one")}); err != nil {
		t.Fatalf("acks=1 with one broker of three: %v", err)
	}

	for _, id := range down {
		c.Restart(id)
	}
	waitISR(t, c, topic, 0, []int32{1, 2, 3})
	all := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err := produceSync(t, all, time.Minute, &kgo.Record{Partition: 0, Value: []byte("acks-all-healed")}); err != nil {
		t.Fatalf("acks=all after the ISR healed: %v", err)
	}
	got := readAll(t, c, topic, 0)
	if !slices.Equal(got, []string{"acks-one", "acks-all-healed"}) {
		t.Fatalf("partition holds %q, want the acks=1 and the healed acks=all record only", got)
	}
}

// readAll reads a partition from its start to its end offset.
func readAll(t *testing.T, c *Cluster, topic string, p int32) []string {
	t.Helper()
	end := endOffset(t, c, c.Admin(), topic, p)
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var values []string
	next := int64(0)
	for next < end {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s-%d: %d of %d records after 60s: %v", topic, p, next, end, fetches.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			values = append(values, string(r.Value))
			next = r.Offset + 1
		})
	}
	return values
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
