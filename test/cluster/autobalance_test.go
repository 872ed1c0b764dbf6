package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestAutoBalance: with --auto-balance on every broker, a fourth broker
// joining three that hold a 12-partition RF=3 topic gets its share without
// an operator. Moves are throttled so that they last a few rounds: the
// controller never has more than --auto-balance-max-moves moving, begins
// no round while moves run, and elects the preferred leaders itself (the
// periodic leader rebalance is off) until every broker holds 9±1 replicas
// and leads 3±1 partitions; then it leaves the cluster alone, and every
// record reads back through the new broker.
func TestAutoBalance(t *testing.T) {
	defer timed(t, "TestAutoBalance")()
	const (
		topic      = "auto-balanced"
		partitions = 12
		records    = 40 // 160 KiB a partition: a move copies it in about 2 s at the throttle
		maxMoves   = 4
		interval   = 2 * time.Second
	)
	c := Start(t, Config{Spare: 1, ExtraArgs: []string{"--auto-balance", "--auto-balance-interval", interval.String(),
		"--auto-balance-max-moves", strconv.Itoa(maxMoves), "--leader-imbalance-check-interval", "0",
		"--reassignment-bytes-per-second", "65536"}})
	replicatedTopic(t, c, topic, partitions, map[string]string{"internal.segment.bytes": "65536", "retention.ms": "-1"})
	for p := range int32(partitions) {
		produceNumbered(t, c, topic, p, 0, records)
	}
	added := c.AddBroker().ID
	adm := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	every := kadm.TopicsSet{}
	for p := range int32(partitions) {
		every.Add(topic, p)
	}
	mostMoving := 0
	start := time.Now()
	c.WaitFor(fmt.Sprintf("broker %d to get its share, every broker in the band", added), 2*time.Minute, func() (bool, string) {
		listed, err := adm.ListPartitionReassignments(ctx, every)
		if err != nil {
			return false, err.Error()
		}
		moving := len(listed[topic])
		mostMoving = max(mostMoving, moving)
		replicas, leaders, err := topicCounts(ctx, adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return moving == 0 && inBand(replicas, leaders, 1, 2, 3, added) && sumCounts(replicas) == 3*partitions,
			fmt.Sprintf("replicas %v, leaders %v, %d moving", replicas, leaders, moving)
	})
	t.Logf("balanced in %v, at most %d partitions moving at once", time.Since(start).Round(time.Millisecond), mostMoving)
	if mostMoving < 1 || mostMoving > maxMoves {
		t.Fatalf("saw at most %d partitions moving at once; want some, and at most --auto-balance-max-moves %d", mostMoving, maxMoves)
	}
	settled := assignments(ctx, t, adm, topic)
	time.Sleep(3 * interval) // rounds that must find nothing to do
	if now := assignments(ctx, t, adm, topic); now != settled {
		t.Fatalf("auto-balance kept moving a balanced cluster:\n%s\nthen\n%s", settled, now)
	}
	for p := range int32(partitions) {
		readNumbered(t, c, added, topic, p, records)
	}
}

func sumCounts(counts map[int32]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// assignments is topic's replicas and leaders as Metadata lists them, one
// partition a line.
func assignments(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) string {
	t.Helper()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		fmt.Fprintf(&b, "%d: replicas %v leader %d\n", p.Partition, p.Replicas, p.Leader)
	}
	return b.String()
}
