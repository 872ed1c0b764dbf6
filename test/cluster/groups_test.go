package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupSurvivesCoordinatorMoves: consumer groups and
// __consumer_offsets (RF 3) keep working when the group's coordinator, the
// leader of its offsets partition, is killed: another broker becomes
// coordinator with every committed offset intact, and the group goes on
// consuming and committing through it until it has read everything.
func TestGroupSurvivesCoordinatorMoves(t *testing.T) {
	defer timed(t, "TestGroupSurvivesCoordinatorMoves")()
	c := Start(t, Config{})
	const topic, group, total = "grouped", "movers", 600
	replicatedTopic(t, c, topic, 3, nil)
	produceKeyed(t, c, topic, total)

	cl := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]bool{}
	consumeAndCommit(t, cl, seen, total/3)
	committed := groupOffsets(t, c, group)
	if sum(committed) == 0 {
		t.Fatal("nothing committed before the coordinator move")
	}

	for move := 1; move <= 2; move++ {
		coord := coordinatorOf(t, c, group)
		c.Kill(coord)
		c.WaitFor(fmt.Sprintf("a new coordinator for %s after killing %d", group, coord), electionTimeout, func() (bool, string) {
			now, err := findCoordinator(c, group)
			return err == nil && now != coord, fmt.Sprintf("coordinator %d, err %v", now, err)
		})
		if got := groupOffsets(t, c, group); !offsetsAtLeast(got, committed) {
			t.Fatalf("move %d: committed offsets went back: before %v, after %v", move, committed, got)
		}
		consumeAndCommit(t, cl, seen, min(total, len(seen)+total/3))
		committed = groupOffsets(t, c, group)
		c.Restart(coord)
	}
	consumeAndCommit(t, cl, seen, total)
	cl.Close()
	if got := groupOffsets(t, c, group); sum(got) != total {
		t.Fatalf("final committed offsets %v sum to %d, want %d (every record)", got, sum(got), total)
	}
}

// produceKeyed writes n records "v<i>" with acks=all and fails on any error.
func produceKeyed(t *testing.T, c *Cluster, topic string, n int) {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
	defer cancel()
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// consumeAndCommit polls until seen holds want distinct values, committing
// after every poll; commit errors during a coordinator move are retried by
// the next poll's commit.
func consumeAndCommit(t *testing.T, cl *kgo.Client, seen map[string]bool, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * progressTimeout)
	for len(seen) < want {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d distinct records, want %d", len(seen), want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := cl.CommitUncommittedOffsets(cctx); err != nil {
			t.Logf("commit (retried at the next poll): %v", err)
		}
		ccancel()
	}
	// A last commit that must succeed, so the caller's offsets are stable.
	c := context.Background()
	ctx, cancel := context.WithTimeout(c, progressTimeout)
	defer cancel()
	for {
		err := cl.CommitUncommittedOffsets(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("commit: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupOffsets is the group's committed offset per partition.
func groupOffsets(t *testing.T, c *Cluster, group string) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	c.WaitFor("offsets of "+group, progressTimeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		adm, closeAdm := freshAdmin(c)
		defer closeAdm()
		resp, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		out = map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return true, ""
	})
	return out
}

func offsetsAtLeast(got, want map[int32]int64) bool {
	for p, w := range want {
		if got[p] < w {
			return false
		}
	}
	return true
}

func sum(m map[int32]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// coordinatorOf waits for the group's coordinator and returns it.
func coordinatorOf(t *testing.T, c *Cluster, group string) int32 {
	t.Helper()
	var id int32
	c.WaitFor("coordinator of "+group, electionTimeout, func() (bool, string) {
		var err error
		id, err = findCoordinator(c, group)
		return err == nil, fmt.Sprint(err)
	})
	return id
}

func findCoordinator(c *Cluster, group string) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	adm, closeAdm := freshAdmin(c)
	defer closeAdm()
	for _, r := range adm.FindGroupCoordinators(ctx, group) {
		if r.Err != nil {
			return -1, r.Err
		}
		return r.NodeID, nil
	}
	return -1, fmt.Errorf("no answer for %s", group)
}

// freshAdmin is an admin client on the running brokers with nothing cached
// (kgo remembers a group's coordinator, which this test kills).
func freshAdmin(c *Cluster) (*kadm.Client, func()) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(c.Up()...)...), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}
