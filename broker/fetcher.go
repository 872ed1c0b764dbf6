package broker

// Follower fetchers (DESIGN.md §4; the issue 5 contract, "Follower side").
//
// The replication state machine of a partition (replication.Replica,
// driven through withReplica in replica.go) decides what its follower
// does; this file and its fetcher_*.go / peer*.go siblings carry it out:
//
//	follow(p, FetchStart)  fetch p from FetchStart.Leader at Offset, CurrentLeaderEpoch = Epoch
//	query(p, EpochQuery)   ask the leader OffsetForLeaderEpoch, feed HandleEpochEndOffset
//	stop(p)                forget p (not a follower any more, or the log is going away)
//
// A partition has at most one task, held by the peerFetcher of its leader:
// one goroutine and one kgo client per leader node id, sending one
// FetchRequest for all of that leader's partitions (replica id = this
// node) and OffsetForLeaderEpoch for the partitions that truncate. The
// peer's address is Config.PeerAddresses[id], else its registration. A
// peer with no tasks left stops and closes its client.
//
// Applying an answer (fetcher_apply.go): under the partition's replica
// mutex, the task must still be the one the request was built from (same
// generation: every follow/query makes a new one, and they run under that
// same mutex), ValidateFetch must accept it and the log must end at the
// fetch offset; then AppendReplicated. With fsync durability the log is
// flushed before Fetched(epoch, LEO, leader HW) reports it, and before any
// fetch at an offset is sent, so a fetch offset counts only flushed data.
//
// Partition errors: FENCED_LEADER_EPOCH pauses the partition until the
// next follow/query (this node's state is stale; the controller's next
// state brings it). NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH mean
// the leader has not applied the state yet: retried with back-off
// (100ms..1s) rather than paused, because no new state may ever come for a
// leader that is merely slow. OFFSET_MOVED_TO_TIERED_STORAGE (109) and
// OFFSET_OUT_OF_RANGE: ListOffsets(-4, earliest local) on the leader; if
// its local log starts above the fetch offset, the log is reset there
// (hotlog.ResetTo, under the replica mutex) and fetching continues; the
// history below stays in the bucket. Connection errors back off the whole
// peer (100ms..1s).
//
// Lock order: a partition's replica mutex, then fetcherManager.mu. Peer
// goroutines hold no fetcher lock while they call withReplica, the log or
// the network; follow/query/stop only take fetcherManager.mu, so they never
// block (they run under the replica mutex).

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/replication"
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
	// replicaMaxResponseBytes bounds what the peer client reads for one
	// response before allocating (kgo's BrokerMaxReadBytes).
	replicaMaxResponseBytes = 100 << 20
	// peerRequestOverhead is added to a request's own wait to time it out
	// (a blackholed link must not hold a fetcher forever).
	peerRequestOverhead = 5 * time.Second
	// Back-off bounds for connection and partition errors.
	minFetchBackoff = 100 * time.Millisecond
	maxFetchBackoff = time.Second
	// idleRecheck bounds how long an idle peer sleeps without a wake-up.
	idleRecheck = time.Second
)

// errStaleTask: an answer for a task that follow/query/stop replaced.
var errStaleTask = errors.New("broker: fetch answer for a replaced task")

// replicaFunc is the signature of Broker.withReplica.
type replicaFunc func(p *partition, fn func(r *replication.Replica) error) error

// fetcherManager owns the follower fetchers: one peerFetcher (goroutine and
// peer client) per leader broker this node follows partitions of.
type fetcherManager struct {
	log    *slog.Logger
	nodeID int32
	// maxWait is replica.fetch.wait.max.ms.
	maxWait time.Duration
	// registrationEpoch is sent as ReplicaState.ReplicaEpoch (v15+).
	registrationEpoch func() int64
	// withReplica is Broker.withReplica; address resolves a peer's
	// host:port ("" while unknown); dial makes a peer client. Seams for
	// tests; set by newFetcherManager and never changed after.
	withReplica replicaFunc
	address     func(node int32) string
	dial        func(node int32, addr string) (peerClient, error)
	// producerSnapshot is Broker.tieredProducerSnapshot (fetcher_snapshot.go);
	// nil means a reset always starts with empty producer state.
	producerSnapshot func(ctx context.Context, p *partition, offset int64) ([]byte, error)

	// ctx ends at close: flush waits and requests of every peer stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per peer goroutine

	// counters are updated by the peers and read by stats.
	counters struct {
		fetches, requestErrors, partitionErrors atomic.Int64
		appendedBytes, epochQueries, resets     atomic.Int64
	}

	mu struct {
		sync.Mutex
		closed bool
		gen    uint64 // the last task generation handed out
		tasks  map[*partition]*fetchTask
		peers  map[int32]*peerFetcher
	}
}

// fetchTask is what the fetchers do for one partition. Guarded by
// fetcherManager.mu; peers work on copies (taskSnapshot).
type fetchTask struct {
	p      *partition
	leader int32
	gen    uint64 // unique per follow/query call
	epoch  int32  // CurrentLeaderEpoch of every request for this task
	// query, if non-nil, is the EpochQuery to send; else the partition
	// fetches at offset.
	query  *replication.EpochQuery
	offset int64
	// paused: FENCED_LEADER_EPOCH; wait for the next follow/query.
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
	p      *partition
	gen    uint64
	epoch  int32
	offset int64
	query  replication.EpochQuery
}

func newFetcherManager(b *Broker) *fetcherManager {
	log := b.log
	if log == nil {
		log = slog.Default()
	}
	m := &fetcherManager{
		log:               log.With("component", "replica-fetcher"),
		nodeID:            b.cfg.NodeID,
		maxWait:           b.cfg.ReplicaFetchMaxWait,
		registrationEpoch: func() int64 { return b.registration().Epoch },
		withReplica:       b.withReplica,
		address:           b.peerAddress,
		dial: func(node int32, addr string) (peerClient, error) {
			return b.dialPeer(b.cfg.NodeID, addr)
		},
		producerSnapshot: b.tieredProducerSnapshot,
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.tasks = map[*partition]*fetchTask{}
	m.mu.peers = map[int32]*peerFetcher{}
	return m
}

// fetcherStats is a snapshot of the fetchers' counters (for metrics).
type fetcherStats struct {
	Peers, Partitions int   // fetchers running; partitions followed or truncating
	Fetches           int64 // FetchRequests answered
	RequestErrors     int64 // requests that failed as a whole (connection, timeout)
	PartitionErrors   int64 // partition error codes and failed appends
	AppendedBytes     int64 // replicated batch bytes appended
	EpochQueries      int64 // OffsetForLeaderEpoch requests answered
	Resets            int64 // logs restarted at the leader's local log start
}

func (m *fetcherManager) stats() fetcherStats {
	m.mu.Lock()
	s := fetcherStats{Peers: len(m.mu.peers), Partitions: len(m.mu.tasks)}
	m.mu.Unlock()
	c := &m.counters
	s.Fetches, s.RequestErrors, s.PartitionErrors = c.fetches.Load(), c.requestErrors.Load(), c.partitionErrors.Load()
	s.AppendedBytes, s.EpochQueries, s.Resets = c.appendedBytes.Load(), c.epochQueries.Load(), c.resets.Load()
	return s
}

// follow makes p fetch from fs.Leader at fs.Offset in fs.Epoch. Non-blocking.
func (m *fetcherManager) follow(p *partition, fs replication.FetchStart) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.assignLocked(p, fs.Leader); t != nil {
		t.epoch, t.offset = fs.Epoch, fs.Offset
	}
}

// query sends q for p to q.Leader. Non-blocking.
func (m *fetcherManager) query(p *partition, q replication.EpochQuery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.assignLocked(p, q.Leader); t != nil {
		t.epoch, t.query = q.CurrentEpoch, &q
	}
}

// stop forgets p: answers in flight for it are dropped. Non-blocking.
func (m *fetcherManager) stop(p *partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(p)
}

// close stops every peer and waits for their goroutines. Call it before
// the logs close, and never under a replica mutex (peers may be waiting
// for one).
func (m *fetcherManager) close() {
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
// on leader's peer, moving it from another peer if needed, and wakes that
// peer. nil when closed or leader is not a peer. REQUIRES: m.mu held.
func (m *fetcherManager) assignLocked(p *partition, leader int32) *fetchTask {
	if m.mu.closed {
		return nil
	}
	if leader < 0 || leader == m.nodeID {
		m.log.Error("fetch task for an invalid leader; ignoring it", "topic", p.topic, "partition", p.index, "leader", leader)
		m.removeLocked(p)
		return nil
	}
	if old := m.mu.tasks[p]; old != nil && old.leader != leader {
		m.removeLocked(p)
	}
	peer := m.peerLocked(leader)
	m.mu.gen++
	t := &fetchTask{p: p, leader: leader, gen: m.mu.gen}
	m.mu.tasks[p] = t
	peer.tasks[p] = t
	peer.poke()
	return t
}

// removeLocked drops p's task; a peer left without tasks stops.
// REQUIRES: m.mu held.
func (m *fetcherManager) removeLocked(p *partition) {
	t := m.mu.tasks[p]
	if t == nil {
		return
	}
	delete(m.mu.tasks, p)
	peer := m.mu.peers[t.leader]
	delete(peer.tasks, p)
	if len(peer.tasks) == 0 {
		peer.cancel()
		delete(m.mu.peers, t.leader)
	}
}

// peerLocked returns leader's peer, starting it if needed.
// REQUIRES: m.mu held, not closed.
func (m *fetcherManager) peerLocked(leader int32) *peerFetcher {
	if peer := m.mu.peers[leader]; peer != nil {
		return peer
	}
	peer := newPeerFetcher(m, leader)
	m.mu.peers[leader] = peer
	m.wg.Add(1)
	go peer.run()
	return peer
}

// work splits peer's tasks into queries and fetches ready to send now, and
// says when the earliest delayed one is due (zero: none).
func (m *fetcherManager) work(peer *peerFetcher, now time.Time) (queries, fetches []taskSnapshot, due time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range peer.tasks {
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

// currentLocked returns s's task if follow/query/stop did not replace it.
// REQUIRES: m.mu held.
func (m *fetcherManager) currentLocked(s taskSnapshot) *fetchTask {
	if t := m.mu.tasks[s.p]; t != nil && t.gen == s.gen {
		return t
	}
	return nil
}

// isCurrent reports whether s's task is still the partition's task. Under
// the partition's replica mutex the answer holds until it is released.
func (m *fetcherManager) isCurrent(s taskSnapshot) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.currentLocked(s) != nil
}

// advance records a successful answer: the next fetch is at offset.
func (m *fetcherManager) advance(s taskSnapshot, offset int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.currentLocked(s); t != nil {
		t.offset, t.backoff, t.notBefore, t.lastErr = offset, 0, time.Time{}, 0
	}
}

// delay backs s's task off after a retriable error (code, for logging:
// it reports whether this error is new for the task and worth a log line).
func (m *fetcherManager) delay(s taskSnapshot, code int16) (logIt bool) {
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

// pause stops s's task until the next follow/query.
func (m *fetcherManager) pause(s taskSnapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.currentLocked(s); t != nil {
		t.paused = true
	}
}
