package txn

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/coordinator/coordtest"
	"github.com/strata-log/strata/internal/testkit"
)

// fakeSender fails the first failFor sends of every partition, then
// accepts; it records the coordinator epochs it was given.
type fakeSender struct {
	mu      sync.Mutex
	failFor int
	tries   map[TopicPartition]int
	epochs  []int32
	written []Markers
}

func (s *fakeSender) SendMarkers(_ context.Context, job Markers, epoch int32) []TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochs = append(s.epochs, epoch)
	var retry []TopicPartition
	for _, tp := range job.Partitions {
		s.tries[tp]++
		if s.tries[tp] <= s.failFor {
			retry = append(retry, tp)
		}
	}
	if len(retry) == 0 {
		s.written = append(s.written, job)
	}
	return retry
}

func testCoordinator(t *testing.T, sender MarkerSender) *Coordinator {
	t.Helper()
	var next int64 = 100
	var mu sync.Mutex
	c, err := New(Config{Partitions: 3, TickInterval: 10 * time.Millisecond, MarkerRetryBackoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, func() (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		next++
		return next, nil
	}, sender)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(c.Close)
	return c
}

func stateOf(c *Coordinator, id string) State {
	m, code := c.Describe(id)
	if code != 0 {
		return StateDead
	}
	return m.State
}

func TestCoordinatorMarkersRetriedAndResumed(t *testing.T) {
	sender := &fakeSender{failFor: 2, tries: map[TopicPartition]int{}}
	c := testCoordinator(t, sender)
	if r := c.InitProducerID(InitInput{ID: "tx", TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("not led: %+v", r)
	}
	log := coordtest.NewMemLog()
	part := c.PartitionFor("tx")
	c.BecomeLeader(part, log, 7)
	testkit.WaitFor(t, 5*time.Second, "load", func() bool { return c.Status("tx") == 0 })
	r := c.InitProducerID(InitInput{ID: "tx", TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if r.Code != 0 || r.ProducerID != 101 || r.ProducerEpoch != 0 {
		t.Fatalf("init: %+v", r)
	}
	tps := []TopicPartition{{"a", 0}, {"b", 1}}
	if code, _ := c.AddPartitions(AddInput{ID: "tx", ProducerID: 101, Partitions: tps}); code != 0 {
		t.Fatalf("add: %d", code)
	}
	if e := c.EndTxn(EndInput{ID: "tx", ProducerID: 101, Commit: true}); e.Code != 0 {
		t.Fatalf("end: %+v", e)
	}
	testkit.WaitFor(t, 5*time.Second, "commit to complete", func() bool { return stateOf(c, "tx") == StateCompleteCommit })
	sender.mu.Lock()
	if len(sender.epochs) != 3 || sender.epochs[0] != 7 || sender.tries[tps[0]] != 3 {
		t.Errorf("sends: epochs %v tries %v", sender.epochs, sender.tries)
	}
	sender.mu.Unlock()

	// A transaction left in PrepareAbort (its coordinator failed before
	// the markers) is finished by the next leader.
	var code int16
	testkit.WaitFor(t, 5*time.Second, "the completion to be durable", func() bool {
		code, _ = c.AddPartitions(AddInput{ID: "tx", ProducerID: 101, Partitions: tps[:1]})
		return code != kerr.ConcurrentTransactions.Code
	})
	if code != 0 {
		t.Fatalf("add: %d", code)
	}
	c.Resign(part)
	stuck := &fakeSender{failFor: 1 << 30, tries: map[TopicPartition]int{}}
	c2 := testCoordinator(t, stuck)
	c2.BecomeLeader(part, log, 8)
	testkit.WaitFor(t, 5*time.Second, "load", func() bool { return c2.Status("tx") == 0 })
	if e := c2.EndTxn(EndInput{ID: "tx", ProducerID: 101, Commit: false}); e.Code != 0 {
		t.Fatalf("abort: %+v", e)
	}
	if e := c2.EndTxn(EndInput{ID: "tx", ProducerID: 101, Commit: false}); e.Code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("abort while markers pend: %+v", e)
	}
	c2.Resign(part)
	c3 := testCoordinator(t, sender)
	c3.BecomeLeader(part, log, 9)
	testkit.WaitFor(t, 5*time.Second, "resumed abort", func() bool { return stateOf(c3, "tx") == StateCompleteAbort })
	sender.mu.Lock()
	defer sender.mu.Unlock()
	last := sender.written[len(sender.written)-1]
	if last.Commit || len(last.Partitions) != 1 || sender.epochs[len(sender.epochs)-1] != 9 {
		t.Errorf("resumed markers: %+v epochs %v", last, sender.epochs)
	}
}

func TestCoordinatorFailedWriteAndTimeout(t *testing.T) {
	sender := &fakeSender{tries: map[TopicPartition]int{}}
	c := testCoordinator(t, sender)
	log := coordtest.NewMemLog()
	c.BecomeLeader(c.PartitionFor("tx"), log, 1)
	testkit.WaitFor(t, 5*time.Second, "load", func() bool { return c.Status("tx") == 0 })
	log.FailAppends(coordinator.ErrNotLed)
	if r := c.InitProducerID(InitInput{ID: "tx", TimeoutMs: 50, ProducerID: -1, ProducerEpoch: -1}); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("init with a failing log: %+v", r)
	}
	if _, code := c.Describe("tx"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("a failed new id must be forgotten: %d", code)
	}
	log.FailAppends(nil)
	r := c.InitProducerID(InitInput{ID: "tx", TimeoutMs: 50, ProducerID: -1, ProducerEpoch: -1})
	if r.Code != 0 {
		t.Fatalf("init: %+v", r)
	}
	if code, _ := c.AddPartitions(AddInput{ID: "tx", ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, Partitions: []TopicPartition{{"a", 0}}}); code != 0 {
		t.Fatalf("add: %d", code)
	}
	// The 50ms timeout passes; the Tick loop aborts with a bumped epoch.
	testkit.WaitFor(t, 5*time.Second, "timeout abort", func() bool { return stateOf(c, "tx") == StateCompleteAbort })
	m, _ := c.Describe("tx")
	if m.ProducerEpoch != r.ProducerEpoch+1 {
		t.Fatalf("epoch after timeout: %d", m.ProducerEpoch)
	}
	if e := c.EndTxn(EndInput{ID: "tx", ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, Commit: true}); e.Code != kerr.ProducerFenced.Code {
		t.Fatalf("late commit of the fenced producer: %+v", e)
	}
}
