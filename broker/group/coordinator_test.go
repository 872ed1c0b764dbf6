package group

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator/coordtest"
)

func testCoordinator(t *testing.T) *Coordinator {
	t.Helper()
	c, err := New(Config{
		OffsetsTopicPartitions: 3, InitialRebalanceDelay: time.Millisecond, TickInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(c.Close)
	return c
}

func waitLoaded(t *testing.T, c *Coordinator, group string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Status(group) == kerr.CoordinatorLoadInProgress.Code {
		if time.Now().After(deadline) {
			t.Fatal("partition never loaded")
		}
		time.Sleep(time.Millisecond)
	}
	if code := c.Status(group); code != 0 {
		t.Fatalf("status %d", code)
	}
}

func TestCoordinatorNotLeaderAndLoad(t *testing.T) {
	c := testCoordinator(t)
	if code := c.Commit(CommitInput{Group: "g", Generation: -1, Offsets: map[TopicPartition]Offset{{"t", 0}: {Offset: 1}}}); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit on a partition not led: %d", code)
	}
	log := coordtest.NewMemLog()
	c.BecomeLeader(c.PartitionFor("g"), log)
	waitLoaded(t, c, "g")
	if code := c.Commit(CommitInput{Group: "g", Generation: -1, Offsets: map[TopicPartition]Offset{{"t", 0}: {Offset: 42, LeaderEpoch: 3}}}); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	// A second coordinator (a restarted broker) loads the same log.
	c2 := testCoordinator(t)
	c2.BecomeLeader(c2.PartitionFor("g"), log)
	waitLoaded(t, c2, "g")
	got, code := c2.FetchOffsets("g", nil)
	if code != 0 || got[TopicPartition{"t", 0}].Offset != 42 || got[TopicPartition{"t", 0}].LeaderEpoch != 3 {
		t.Fatalf("after reload: %v %d", got, code)
	}
	c2.Resign(c2.PartitionFor("g"))
	if _, code := c2.FetchOffsets("g", nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("after resign: %d", code)
	}
}

func TestCommitVisibleOnlyWhenDurable(t *testing.T) {
	c := testCoordinator(t)
	log := coordtest.NewMemLog()
	c.BecomeLeader(c.PartitionFor("g"), log)
	waitLoaded(t, c, "g")
	log.HoldHW()
	done := make(chan int16, 1)
	go func() {
		done <- c.Commit(CommitInput{Group: "g", Generation: -1, Offsets: map[TopicPartition]Offset{{"t", 1}: {Offset: 7}}})
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case code := <-done:
		t.Fatalf("commit answered (%d) before it was durable", code)
	default:
	}
	if got, _ := c.FetchOffsets("g", nil); len(got) != 0 {
		t.Fatalf("offsets visible before durable: %v", got)
	}
	log.Release()
	if code := <-done; code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if got, _ := c.FetchOffsets("g", nil); got[TopicPartition{"t", 1}].Offset != 7 {
		t.Fatalf("offsets after durable: %v", got)
	}
}

func TestCoordinatorGroupRoundTrip(t *testing.T) {
	c := testCoordinator(t)
	log := coordtest.NewMemLog()
	for p := int32(0); p < 3; p++ {
		c.BecomeLeader(p, log) // one log for all: fine for this test
	}
	waitLoaded(t, c, "grp")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in := JoinInput{Group: "grp", ClientID: "c", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range", Metadata: []byte("m")}},
		SessionTimeoutMs: 6000, RebalanceTimeoutMs: 6000, RequireKnownMemberID: true}
	j := c.Join(ctx, in)
	if j.Code != kerr.MemberIDRequired.Code || j.MemberID == "" {
		t.Fatalf("first join: %+v", j)
	}
	in.MemberID = j.MemberID
	j = c.Join(ctx, in)
	if j.Code != 0 || j.Generation != 1 || j.Leader != in.MemberID || len(j.Members) != 1 {
		t.Fatalf("second join: %+v", j)
	}
	s := c.Sync(ctx, SyncInput{Group: "grp", MemberID: in.MemberID, Generation: 1, Assignments: []Assignment{{in.MemberID, []byte("a")}}})
	if s.Code != 0 || string(s.Assignment) != "a" {
		t.Fatalf("sync: %+v", s)
	}
	if code := c.Heartbeat("grp", 1, MemberRef{MemberID: in.MemberID}); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	c2 := testCoordinator(t)
	c2.BecomeLeader(c2.PartitionFor("grp"), log)
	waitLoaded(t, c2, "grp")
	d, code := c2.Describe("grp")
	if code != 0 || d.State != StateStable || len(d.Members) != 1 || string(d.Members[0].Assignment) != "a" {
		t.Fatalf("describe after reload: %+v %d", d, code)
	}
}
