package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroup848SurvivesCoordinatorMoves: a group of the
// KIP-848 consumer protocol keeps its members, their epochs and its
// committed offsets when its coordinator is killed: the new coordinator
// replays the group's records from the replicated __consumer_offsets, the
// member goes on heartbeating with the same id (no rejoin), and the group
// reads everything.
func TestConsumerGroup848SurvivesCoordinatorMoves(t *testing.T) {
	defer timed(t, "TestConsumerGroup848SurvivesCoordinatorMoves")()
	c := Start(t, Config{ExtraArgs: []string{"--group-consumer-heartbeat-interval", "300ms",
		"--group-consumer-session-timeout", "45s"}})
	const topic, group, total = "grouped848", "movers848", 600
	replicatedTopic(t, c, topic, 3, nil)
	produceKeyed(t, c, topic, total)

	cl := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]bool{}
	consumeAndCommit(t, cl, seen, total/3)
	committed := groupOffsets(t, c, group)
	member, epoch := describeOnlyMember(t, c, group)

	coord := coordinatorOf(t, c, group)
	c.Kill(coord)
	c.WaitFor(fmt.Sprintf("a new coordinator for %s after killing %d", group, coord), electionTimeout, func() (bool, string) {
		now, err := findCoordinator(c, group)
		return err == nil && now != coord, fmt.Sprintf("coordinator %d, err %v", now, err)
	})
	if got := groupOffsets(t, c, group); !offsetsAtLeast(got, committed) {
		t.Fatalf("committed offsets went back: before %v, after %v", committed, got)
	}
	consumeAndCommit(t, cl, seen, total)
	after, afterEpoch := describeOnlyMember(t, c, group)
	if after != member || afterEpoch < epoch {
		t.Fatalf("member after the move: %s epoch %d; before: %s epoch %d (want the same member, epoch not reset)",
			after, afterEpoch, member, epoch)
	}
	cl.Close()
	if got := groupOffsets(t, c, group); sum(got) != total {
		t.Fatalf("final committed offsets %v sum to %d, want %d (every record)", got, sum(got), total)
	}
	c.Restart(coord)
}

// describeOnlyMember waits until the consumer group has exactly one member
// with all 3 partitions reconciled, and returns its id and epoch.
func describeOnlyMember(t *testing.T, c *Cluster, group string) (id string, epoch int32) {
	t.Helper()
	c.WaitFor("one reconciled member of "+group, progressTimeout, func() (bool, string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(c.Up()...)...), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			return false, err.Error()
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return false, fmt.Sprintf("describe: %v %+v", err, resp)
		}
		g := resp.Groups[0]
		if len(g.Members) != 1 || len(g.Members[0].Assignment.TopicPartitions) != 1 ||
			len(g.Members[0].Assignment.TopicPartitions[0].Partitions) != 3 {
			return false, fmt.Sprintf("members %+v", g.Members)
		}
		id, epoch = g.Members[0].MemberID, g.Members[0].MemberEpoch
		return true, ""
	})
	return id, epoch
}
