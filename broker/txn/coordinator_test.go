package txn

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/internal/testkit"
)

// memLog is an in-memory Log; every append is durable at once unless
// failing is set.
type memLog struct {
	mu      sync.Mutex
	batches [][]byte
	leo     int64
	failing bool
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return 0, ErrNotLeader
	}
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(b[0:8], uint64(l.leo))
	base := l.leo
	l.leo += int64(binary.BigEndian.Uint32(b[23:27])) + 1
	l.batches = append(l.batches, b)
	return base, nil
}

func (l *memLog) WaitDurable(context.Context, int64) error { return nil }

func (l *memLog) Read(offset int64, _ int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	for _, b := range l.batches {
		if last := int64(binary.BigEndian.Uint64(b[0:8])) + int64(binary.BigEndian.Uint32(b[23:27])); last >= offset {
			out = append(out, b...)
		}
	}
	return out, nil
}

func (l *memLog) LogStartOffset() int64 { return 0 }

func (l *memLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leo
}

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
	log := &memLog{}
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
	log := &memLog{}
	c.BecomeLeader(c.PartitionFor("tx"), log, 1)
	testkit.WaitFor(t, 5*time.Second, "load", func() bool { return c.Status("tx") == 0 })
	log.failing = true
	if r := c.InitProducerID(InitInput{ID: "tx", TimeoutMs: 50, ProducerID: -1, ProducerEpoch: -1}); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("init with a failing log: %+v", r)
	}
	if _, code := c.Describe("tx"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("a failed new id must be forgotten: %d", code)
	}
	log.failing = false
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
