package follower

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/peer"
)

// Follower fetch limits (Kafka's replica.fetch.* defaults).
const (
	// replicaFetchMaxBytes bounds one FetchRequest's answer
	// (replica.fetch.response.max.bytes).
	replicaFetchMaxBytes = 10 << 20
	// replicaFetchPartitionMaxBytes bounds one partition's records
	// (replica.fetch.max.bytes); a larger first batch still comes whole
	// (KIP-74).
	replicaFetchPartitionMaxBytes = 1 << 20
	// Back-off bounds for connection and partition errors.
	minFetchBackoff = 100 * time.Millisecond
	maxFetchBackoff = time.Second
	// idleRecheck bounds how long an idle leaderFollower sleeps without a
	// wake-up.
	idleRecheck = time.Second
)

// errStaleTask: an answer for a task that Follow/Query/Stop replaced.
var errStaleTask = errors.New("follower: fetch answer for a replaced task")

// Partition is one partition this node may follow. The interface value
// keys its task, so the shell must hand the same value for the
// partition's whole life (a pointer).
type Partition interface {
	Topic() string
	TopicID() metadata.TopicID
	Index() int32
	Log() Log
}

// Log is the part of a partition's hotlog.Log a follower reads and writes.
type Log interface {
	LogStartOffset() int64
	LogEndOffset() int64
	FlushedOffset() int64
	// WaitFlushed returns once offset is flushed (or ctx ends).
	WaitFlushed(ctx context.Context, offset int64) error
	AppendReplicated(batches []byte) (hotlog.AppendResult, error)
	// ResetTo and ResetToWithProducerSnapshot restart the log empty at
	// offset (the latter with the producer state snap).
	ResetTo(offset int64) error
	ResetToWithProducerSnapshot(offset int64, snap []byte) error
}

var _ Log = (*hotlog.Log)(nil)

// Replicas gives access to each partition's replication state machine.
type Replicas interface {
	// WithReplica runs fn on p's Replica under p's replica mutex, then
	// carries out the Ready it left (which may call Follow, Query or Stop
	// of this Manager). fn's error is returned. r may be nil when p has
	// no replica.
	WithReplica(p Partition, fn func(r *replication.Replica) error) error
}

// Peers says where other brokers listen and how to reach them.
type Peers interface {
	// Address is where node listens for replication ("" while unknown).
	Address(node int32) string
	// Dial makes a client for the broker node at addr.
	Dial(node int32, addr string) (peer.Client, error)
}

// ProducerSnapshots reads producer state kept outside the log.
type ProducerSnapshots interface {
	// ProducerSnapshot returns p's producer state as of offset exactly,
	// or an error saying why there is none.
	ProducerSnapshot(ctx context.Context, p Partition, offset int64) ([]byte, error)
}

// Config wires a Manager. Every field but ProducerSnapshots is required.
type Config struct {
	// NodeID is this broker's id: the replica id of every request.
	NodeID int32
	// MaxWait is replica.fetch.wait.max.ms: how long a leader may hold a
	// fetch with nothing new.
	MaxWait time.Duration
	// RegistrationEpoch is this broker's registration epoch, sent as
	// ReplicaState.ReplicaEpoch (Fetch v15+); 0 while unknown.
	RegistrationEpoch func() int64
	Replicas          Replicas
	Peers             Peers
	// ProducerSnapshots, when set, gives a log restarted at the leader's
	// local log start its producer state; nil means it starts empty.
	ProducerSnapshots ProducerSnapshots
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Manager owns the followers: one leaderFollower (goroutine and peer
// client) per leader broker this node follows partitions of.
type Manager struct {
	log *slog.Logger
	cfg Config // read-only after New

	// ctx ends at Close: flush waits and requests of every leaderFollower stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per leaderFollower goroutine

	// counters are updated by the leaderFollowers and read by Stats.
	counters struct {
		fetches, requestErrors, partitionErrors atomic.Int64
		appendedBytes, epochQueries, resets     atomic.Int64
	}

	mu struct {
		sync.Mutex
		closed  bool
		gen     uint64 // the last task generation handed out
		tasks   map[Partition]*task
		leaders map[int32]*leaderFollower
	}
}

// task is what the followers do for one partition. Guarded by Manager.mu;
// leaderFollowers work on copies (taskSnapshot).
type task struct {
	p      Partition
	leader int32
	gen    uint64 // unique per Follow/Query call
	epoch  int32  // CurrentLeaderEpoch of every request for this task
	// query, if non-nil, is the EpochQuery to send; else the partition
	// fetches at offset.
	query  *replication.EpochQuery
	offset int64
	// paused: FENCED_LEADER_EPOCH; wait for the next Follow/Query.
	paused bool
	// notBefore delays the next request after a retriable error; backoff
	// is the delay the next error adds (0 after a success).
	notBefore time.Time
	backoff   time.Duration
	// lastErr is the last error code logged, so a repeating error is
	// logged once (rate limit), not at every retry.
	lastErr int16
}

// taskSnapshot is a copy of a task taken to build one request.
type taskSnapshot struct {
	p      Partition
	gen    uint64
	epoch  int32
	offset int64
	query  replication.EpochQuery
}

// New makes a Manager; it starts goroutines only once a partition is
// followed.
func New(cfg Config) *Manager {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.RegistrationEpoch == nil {
		cfg.RegistrationEpoch = func() int64 { return 0 }
	}
	m := &Manager{log: log, cfg: cfg} // the caller names the component
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.tasks = map[Partition]*task{}
	m.mu.leaders = map[int32]*leaderFollower{}
	return m
}

// Stats is a snapshot of the followers' counters (for metrics).
type Stats struct {
	Peers, Partitions int   // leaderFollowers running; partitions followed or truncating
	Fetches           int64 // FetchRequests answered
	RequestErrors     int64 // requests that failed as a whole (connection, timeout)
	PartitionErrors   int64 // partition error codes and failed appends
	AppendedBytes     int64 // replicated batch bytes appended
	EpochQueries      int64 // OffsetForLeaderEpoch requests answered
	Resets            int64 // logs restarted at the leader's local log start
}

// Stats returns the counters and the current number of leaders and tasks.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	s := Stats{Peers: len(m.mu.leaders), Partitions: len(m.mu.tasks)}
	m.mu.Unlock()
	c := &m.counters
	s.Fetches, s.RequestErrors, s.PartitionErrors = c.fetches.Load(), c.requestErrors.Load(), c.partitionErrors.Load()
	s.AppendedBytes, s.EpochQueries, s.Resets = c.appendedBytes.Load(), c.epochQueries.Load(), c.resets.Load()
	return s
}

// Follow makes p fetch from fs.Leader at fs.Offset in fs.Epoch. Non-blocking.
func (m *Manager) Follow(p Partition, fs replication.FetchStart) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.assignLocked(p, fs.Leader); t != nil {
		t.epoch, t.offset = fs.Epoch, fs.Offset
	}
}

// Query sends q for p to q.Leader. Non-blocking.
func (m *Manager) Query(p Partition, q replication.EpochQuery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.assignLocked(p, q.Leader); t != nil {
		t.epoch, t.query = q.CurrentEpoch, &q
	}
}

// Stop forgets p: answers in flight for it are dropped. Non-blocking.
func (m *Manager) Stop(p Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(p)
}

// Close stops every leaderFollower and waits for their goroutines. Call it
// before the logs close, and never under a replica mutex (followers may be
// waiting for one). Follow and Query after Close do nothing.
func (m *Manager) Close() {
	m.mu.Lock()
	m.mu.closed = true
	for p := range m.mu.tasks {
		m.removeLocked(p)
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// assignLocked gives p a new task (new generation, no pause or back-off)
// on leader's leaderFollower, moving it from another one if needed, and
// wakes it. nil when closed or leader is not a peer. REQUIRES: m.mu held.
func (m *Manager) assignLocked(p Partition, leader int32) *task {
	if m.mu.closed {
		return nil
	}
	if leader < 0 || leader == m.cfg.NodeID {
		m.log.Error("fetch task for an invalid leader; ignoring it", "topic", p.Topic(), "partition", p.Index(), "leader", leader)
		m.removeLocked(p)
		return nil
	}
	if old := m.mu.tasks[p]; old != nil && old.leader != leader {
		m.removeLocked(p)
	}
	lf := m.leaderLocked(leader)
	m.mu.gen++
	t := &task{p: p, leader: leader, gen: m.mu.gen}
	m.mu.tasks[p] = t
	lf.tasks[p] = t
	lf.poke()
	return t
}

// removeLocked drops p's task; a leaderFollower left without tasks stops.
// REQUIRES: m.mu held.
func (m *Manager) removeLocked(p Partition) {
	t := m.mu.tasks[p]
	if t == nil {
		return
	}
	delete(m.mu.tasks, p)
	lf := m.mu.leaders[t.leader]
	delete(lf.tasks, p)
	if len(lf.tasks) == 0 {
		lf.cancel()
		delete(m.mu.leaders, t.leader)
	}
}

// leaderLocked returns leader's leaderFollower, starting it if needed.
// REQUIRES: m.mu held, not closed.
func (m *Manager) leaderLocked(leader int32) *leaderFollower {
	if lf := m.mu.leaders[leader]; lf != nil {
		return lf
	}
	lf := newLeaderFollower(m, leader)
	m.mu.leaders[leader] = lf
	m.wg.Add(1)
	go lf.run()
	return lf
}

// work splits lf's tasks into queries and fetches ready to send now, and
// says when the earliest delayed one is due (zero: none).
func (m *Manager) work(lf *leaderFollower, now time.Time) (queries, fetches []taskSnapshot, due time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range lf.tasks {
		switch {
		case t.paused:
			continue
		case now.Before(t.notBefore):
			if due.IsZero() || t.notBefore.Before(due) {
				due = t.notBefore
			}
			continue
		}
		s := taskSnapshot{p: t.p, gen: t.gen, epoch: t.epoch, offset: t.offset}
		if t.query != nil {
			s.query = *t.query
			queries = append(queries, s)
		} else {
			fetches = append(fetches, s)
		}
	}
	return queries, fetches, due
}

// currentLocked returns s's task if Follow/Query/Stop did not replace it.
// REQUIRES: m.mu held.
func (m *Manager) currentLocked(s taskSnapshot) *task {
	if t := m.mu.tasks[s.p]; t != nil && t.gen == s.gen {
		return t
	}
	return nil
}

// isCurrent reports whether s's task is still the partition's task. Under
// the partition's replica mutex the answer holds until it is released.
func (m *Manager) isCurrent(s taskSnapshot) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.currentLocked(s) != nil
}

// advance records a successful answer: the next fetch is at offset.
func (m *Manager) advance(s taskSnapshot, offset int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.currentLocked(s); t != nil {
		t.offset, t.backoff, t.notBefore, t.lastErr = offset, 0, time.Time{}, 0
	}
}

// delay backs s's task off after a retriable error (code, for logging:
// it reports whether this error is new for the task and worth a log line).
func (m *Manager) delay(s taskSnapshot, code int16) (logIt bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.currentLocked(s)
	if t == nil {
		return false
	}
	m.counters.partitionErrors.Add(1)
	t.backoff = min(max(2*t.backoff, minFetchBackoff), maxFetchBackoff)
	t.notBefore = time.Now().Add(t.backoff)
	logIt, t.lastErr = t.lastErr != code, code
	return logIt
}

// pause stops s's task until the next Follow/Query.
func (m *Manager) pause(s taskSnapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.currentLocked(s); t != nil {
		t.paused = true
	}
}

// withReplica is cfg.Replicas.WithReplica.
func (m *Manager) withReplica(p Partition, fn func(r *replication.Replica) error) error {
	return m.cfg.Replicas.WithReplica(p, fn)
}
