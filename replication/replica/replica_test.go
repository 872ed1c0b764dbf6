package replica

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

// Unit tests of the shell through its own interfaces, with in-memory
// twins: no broker, no etcd, no disk.

// memLog is an in-memory Log: positions set by the test, no epochs.
type memLog struct {
	mu           sync.Mutex
	leo, flushed int64
	changed      chan struct{}
	truncatedAt  []int64
}

var _ Log = (*memLog)(nil)

func newMemLog() *memLog { return &memLog{changed: make(chan struct{})} }

func (l *memLog) LatestEpoch() int32                           { return -1 }
func (l *memLog) EndOffsetForEpoch(epoch int32) (int32, int64) { return -1, -1 }

func (l *memLog) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leo
}

func (l *memLog) FlushedOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushed
}

func (l *memLog) WaitFlushed(ctx context.Context, offset int64) error {
	for {
		l.mu.Lock()
		flushed, ch := l.flushed, l.changed
		l.mu.Unlock()
		if flushed > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *memLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *memLog) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.truncatedAt = append(l.truncatedAt, offset)
	l.leo, l.flushed = min(l.leo, offset), min(l.flushed, offset)
	return nil
}

// grow appends (and flushes) up to leo behind the shell's back, as the
// flusher would, and wakes the watcher.
func (l *memLog) grow(leo int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leo, l.flushed = leo, leo
	close(l.changed)
	l.changed = make(chan struct{})
}

// memStore is an in-memory ISRStore holding one partition's state.
type memStore struct {
	mu    sync.Mutex
	state metadata.PartitionState
	cases int
}

var _ ISRStore = (*memStore)(nil)

func (s *memStore) CASPartitionState(_ context.Context, _ metadata.TopicID, _ int32, want metadata.PartitionState) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cases++
	if want.Version != s.state.Version {
		return 0, metadata.ErrCASFailed
	}
	want.Version++
	s.state = want
	return want.Version, nil
}

func (s *memStore) PartitionStates(context.Context, metadata.TopicID) ([]metadata.PartitionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []metadata.PartitionState{s.state}, nil
}

// outputs records what a Core handed out.
type outputs struct {
	mu                                 sync.Mutex
	follows, queries, stops, leadships int
}

func (o *outputs) Follow(replication.FetchStart) { o.mu.Lock(); o.follows++; o.mu.Unlock() }
func (o *outputs) Query(replication.EpochQuery)  { o.mu.Lock(); o.queries++; o.mu.Unlock() }
func (o *outputs) StopFollowing()                { o.mu.Lock(); o.stops++; o.mu.Unlock() }
func (o *outputs) LeadershipChanged()            { o.mu.Lock(); o.leadships++; o.mu.Unlock() }

func (o *outputs) counts() [4]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return [4]int{o.follows, o.queries, o.stops, o.leadships}
}

type rig struct {
	shell *Shell
	core  *Core
	log   *memLog
	store *memStore
	out   *outputs
}

func newRig(t *testing.T, state metadata.PartitionState) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rg := &rig{shell: &Shell{}, log: newMemLog(), store: &memStore{state: state}, out: &outputs{}}
	rg.shell.Init(ShellConfig{ReplicaID: 1, LagTimeMax: time.Second, Store: rg.store, Lifetime: ctx,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		cancel()
		rg.shell.WaitBackground(5 * time.Second)
	})
	var err error
	rg.core, err = rg.shell.New(Partition{Topic: "t", Index: 0}, rg.log, 1, rg.out)
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

// lead applies state as BecomeLeader, as the broker's state application does.
func (rg *rig) lead(t *testing.T, st metadata.PartitionState) {
	t.Helper()
	err := rg.core.WithReplica(func(r *replication.Replica) error {
		if err := r.BecomeLeader(replication.LeaderState{Epoch: st.LeaderEpoch, Version: st.Version,
			Replicas: st.Replicas, ISR: st.ISR, LEO: rg.log.LogEndOffset()}); err != nil {
			return err
		}
		rg.core.AppliedLocked().Led = st
		rg.core.AppliedLocked().Version = st.Version
		return rg.core.ReportLocalLogLocked(r)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAcksAllCompleteWhenTheFollowerCatchesUp(t *testing.T) {
	st := metadata.PartitionState{Leader: 1, LeaderEpoch: 3, Version: 7, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	rg := newRig(t, st)
	rg.lead(t, st)
	if !rg.core.IsLeader() || rg.core.Epoch() != 3 || rg.out.counts()[3] != 1 {
		t.Fatalf("leader %v epoch %d outputs %v: want leading epoch 3, one leadership change", rg.core.IsLeader(), rg.core.Epoch(), rg.out.counts())
	}
	rg.log.grow(10)
	id, result := rg.shell.Acks().Register()
	hwMoved := rg.core.HWChanged()
	err := rg.core.WithReplica(func(r *replication.Replica) error {
		if err := rg.core.ReportLocalLogLocked(r); err != nil {
			return err
		}
		return r.WaitForAcks(replication.AckWaiter{ID: id, RequiredOffset: 10, TimeoutMs: 30_000})
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		t.Fatalf("acks=all answered (%v) before the follower fetched", err)
	default:
	}
	if err := rg.core.WithReplica(func(r *replication.Replica) error { return r.FollowerFetch(2, 10, 3) }); err != nil {
		t.Fatal(err)
	}
	if err := <-result; err != nil {
		t.Fatalf("acks=all answered %v, want success", err)
	}
	<-hwMoved
	if hw := rg.core.HighWatermark(); hw != 10 {
		t.Fatalf("published HW %d, want 10", hw)
	}
}

func TestISRShrinkIsWrittenToTheStore(t *testing.T) {
	st := metadata.PartitionState{Leader: 1, LeaderEpoch: 1, Version: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	rg := newRig(t, st)
	rg.lead(t, st)
	rg.log.grow(5)
	// Follower 2 never fetches: after replica.lag.time.max the leader
	// proposes ISR [1] and the shell compare-and-swaps it.
	if err := rg.core.Tick(1500); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the ISR change to commit", func() bool { return slices.Equal(rg.core.Status().ISR, []int32{1}) })
	rg.store.mu.Lock()
	stored := rg.store.state
	rg.store.mu.Unlock()
	if !slices.Equal(stored.ISR, []int32{1}) || stored.Version != 5 {
		t.Fatalf("stored state %+v, want ISR [1] at version 5", stored)
	}
	err := rg.core.WithReplica(func(*replication.Replica) error {
		if a := rg.core.AppliedLocked(); a.Led.Version != 5 || !slices.Equal(a.Led.ISR, []int32{1}) || a.Version != 5 {
			t.Errorf("applied %+v: want the committed state as the next CAS base", a)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// With the ISR shrunk to the leader, the HW follows its own log.
	testkit.WaitFor(t, 10*time.Second, "the HW", func() bool { return rg.core.HighWatermark() == 5 })
}

func TestLogWatcherReportsLeaderProgress(t *testing.T) {
	st := metadata.PartitionState{Leader: 1, LeaderEpoch: 1, Version: 1, Replicas: []int32{1}, ISR: []int32{1}}
	rg := newRig(t, st)
	rg.core.StartLogWatcher()
	rg.lead(t, st)
	rg.log.grow(42) // an append the leader's append path did not report
	testkit.WaitFor(t, 10*time.Second, "the watcher to report the append", func() bool { return rg.core.HighWatermark() == 42 })
	if leo, _ := rg.core.Reported(); leo != 42 {
		t.Fatalf("reported LEO %d, want 42", leo)
	}
	if got := rg.shell.Stats().MissedProgress; got != 0 {
		t.Fatalf("%d misses counted, want 0", got)
	}
}

func TestFollowerOutputsAndRetire(t *testing.T) {
	rg := newRig(t, metadata.PartitionState{})
	rg.log.grow(8)
	err := rg.core.WithReplica(func(r *replication.Replica) error {
		return r.BecomeFollower(replication.FollowerState{Epoch: 2, Leader: 2, LEO: rg.log.LogEndOffset()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := rg.out.counts(); c[0]+c[1] != 1 || c[2] != 0 {
		t.Fatalf("outputs %v after following: want one fetch or epoch query, no stop", c)
	}
	if err := rg.core.StepDownIfLeader(); err != nil { // a follower: untouched
		t.Fatal(err)
	}
	if c := rg.out.counts(); c[2] != 0 {
		t.Fatalf("outputs %v: a follower was told to stop by StepDownIfLeader", c)
	}
	rg.core.Retire()
	if c := rg.out.counts(); c[2] != 1 {
		t.Fatalf("outputs %v after Retire: want following stopped once", c)
	}
	if err := rg.core.WithReplica(func(*replication.Replica) error { return nil }); err != ErrClosed {
		t.Fatalf("input after Retire: %v, want ErrClosed", err)
	}
	rg.core.Retire() // idempotent
}

// leadsIf is a Leadership twin: this broker leads states naming leader 1
// with LeaderBrokerEpoch 9 (its "registration"); the HW brought into
// leadership is hw.
type leadsIf struct {
	hw       int64
	prepared *int
}

func (l leadsIf) Leads(st metadata.PartitionState) bool {
	return st.Leader == 1 && st.LeaderBrokerEpoch == 9
}

func (l leadsIf) PrepareToLead(*replication.Replica) error {
	*l.prepared++
	return nil
}

func (l leadsIf) InheritedHighWatermark(r *replication.Replica) int64 {
	return max(r.HighWatermark(), l.hw)
}

func TestApplyStateFollowsTheRule(t *testing.T) {
	rg := newRig(t, metadata.PartitionState{})
	rg.log.grow(20)
	prepared := 0
	lead := leadsIf{hw: 12, prepared: &prepared}
	led := metadata.PartitionState{Leader: 1, LeaderBrokerEpoch: 9, LeaderEpoch: 4, Version: 10, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	rg.core.ApplyState(led, 1, lead)
	if s := rg.core.Status(); s.Role != replication.RoleLeader || s.LeaderEpoch != 4 || s.HighWatermark != 12 || prepared != 1 {
		t.Fatalf("status %+v prepared %d: want leader of epoch 4 with the inherited HW 12, prepared once", s, prepared)
	}
	// An older state read late is ignored.
	rg.core.ApplyState(metadata.PartitionState{Leader: 2, LeaderEpoch: 3, Version: 9, Replicas: []int32{1, 2}}, 1, lead)
	if !rg.core.IsLeader() {
		t.Fatal("a stale state deposed the leader")
	}
	// A state naming this broker by a stale registration: step down.
	rg.core.ApplyState(metadata.PartitionState{Leader: 1, LeaderBrokerEpoch: 8, LeaderEpoch: 5, Version: 11, Replicas: []int32{1, 2}}, 1, lead)
	if s := rg.core.Status(); s.Role != replication.RoleFollower || s.Leader != -1 {
		t.Fatalf("status %+v: want a follower of nobody", s)
	}
	// Another leader, this broker a replica: follow it.
	rg.core.ApplyState(metadata.PartitionState{Leader: 2, LeaderBrokerEpoch: 3, LeaderEpoch: 6, Version: 12, Replicas: []int32{1, 2}}, 1, lead)
	if s := rg.core.Status(); s.Role != replication.RoleFollower || s.Leader != 2 {
		t.Fatalf("status %+v: want a follower of 2", s)
	}
	if c := rg.out.counts(); c[0]+c[1] == 0 {
		t.Fatalf("outputs %v: following 2 started no fetch or epoch query", c)
	}
	err := rg.core.WithReplica(func(*replication.Replica) error {
		if a := rg.core.AppliedLocked(); a.Version != 12 || a.Led.Version != 10 {
			t.Errorf("applied %+v: want version 12 applied, led at version 10", a)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
