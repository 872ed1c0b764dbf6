package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/test/history"
)

// Bounds of the soak's consumer groups.
const (
	groupCommitTimeout   = 10 * time.Second       // one member's OffsetCommit
	groupPollTimeout     = time.Second            // one member's poll
	commitReadInterval   = 500 * time.Millisecond // how often committed offsets are read
	commitReadTimeout    = 3 * time.Second        // one OffsetFetch
	groupCatchUpTimeout  = 2 * time.Minute        // groups committing every end offset at the finish
	groupSessionTimeout  = 10 * time.Second       // classic members; consumer-protocol ones get the broker's
	groupHeartbeatPeriod = time.Second
	minMemberLife        = 10 * time.Second // churn: a member is replaced after this much ...
	maxMemberLife        = 25 * time.Second // ... to this much
)

// groupProtocol is a consumer group protocol.
type groupProtocol string

const (
	classicProtocol  groupProtocol = "classic"  // JoinGroup/SyncGroup, client-side cooperative-sticky assignment
	consumerProtocol groupProtocol = "consumer" // KIP-848: ConsumerGroupHeartbeat, broker-side assignment
)

// soakGroup is a consumer group of a few members reading a topic from its
// start and committing after every poll; every record a member sees and
// every commit it is told succeeded go into H. Each member's run on one
// partition is one history session, starting at each assignment (where the
// member seeks to the committed offset), and rebalances are blocked while a
// poll's records are processed and committed, so a session's records never
// cross an assignment.
//
// Every few seconds (seeded) the group replaces its oldest member by a new
// one, so that partitions keep moving between members: the new owner starts
// from the committed offset the previous one left.
type soakGroup struct {
	c        *Cluster
	name     string
	protocol groupProtocol
	topic    string
	h        *history.History
	rng      *rand.Rand // churn timing only
	stop     context.CancelFunc
	done     chan struct{}

	mu struct {
		sync.Mutex
		members []*groupMember // running, oldest first
		retired []*groupMember // replaced by churn, for the report
		started int            // members started so far (names m0, m1, ...)
	}
}

type groupMember struct {
	g    *soakGroup
	name string
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}

	records, commits, commitErrs atomic.Int64
	mu                           struct {
		sync.Mutex
		assignments map[int32]int // partition -> times assigned to this member
		firstErrs   []string
	}
}

// startSoakGroup starts group number n of the soak with members members
// (its churn timing is stream n of seed).
func startSoakGroup(c *Cluster, h *history.History, topic, name string, protocol groupProtocol, members, n int, seed int64) *soakGroup {
	ctx, cancel := context.WithCancel(context.Background())
	g := &soakGroup{c: c, name: name, protocol: protocol, topic: topic, h: h,
		rng: rand.New(rand.NewPCG(uint64(seed), 0x960+uint64(n))), stop: cancel, done: make(chan struct{})}
	for i := 0; i < members; i++ {
		g.addMember()
	}
	go g.churn(ctx)
	return g
}

// churn replaces the oldest member every minMemberLife..maxMemberLife until
// ctx ends.
func (g *soakGroup) churn(ctx context.Context) {
	defer close(g.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(between(g.rng, minMemberLife, maxMemberLife)):
		}
		g.mu.Lock()
		oldest := g.mu.members[0]
		g.mu.members = g.mu.members[1:]
		g.mu.retired = append(g.mu.retired, oldest)
		g.mu.Unlock()
		oldest.close()
		g.addMember()
	}
}

func (g *soakGroup) addMember() {
	g.mu.Lock()
	name := fmt.Sprintf("m%d", g.mu.started)
	g.mu.started++
	g.mu.Unlock()
	m := g.startMember(name)
	g.mu.Lock()
	g.mu.members = append(g.mu.members, m)
	g.mu.Unlock()
}

func (g *soakGroup) startMember(name string) *groupMember {
	m := &groupMember{g: g, name: name, done: make(chan struct{})}
	m.mu.assignments = map[int32]int{}
	opts := []kgo.Opt{kgo.ConsumerGroup(g.name), kgo.ConsumeTopics(g.topic), kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(300 * time.Millisecond),
		kgo.OnPartitionsAssigned(m.assigned), kgo.OnPartitionsRevoked(m.revoked)}
	if g.protocol == consumerProtocol {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	} else {
		opts = append(opts, kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(groupHeartbeatPeriod))
	}
	m.cl = g.c.Client(opts...)
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go m.run(ctx)
	return m
}

// assigned starts a new session for every partition newly assigned.
func (m *groupMember) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range assigned[m.g.topic] {
		m.mu.assignments[p]++
	}
}

// revoked commits what was read before the partitions go to another member
// (kgo's recommendation without autocommit); a failure only means the next
// owner reads some records again.
func (m *groupMember) revoked(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
	m.commit(ctx)
}

func (m *groupMember) session(p int32) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("%s/%s/p%d#%d", m.g.name, m.name, p, m.mu.assignments[p])
}

func (m *groupMember) run(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, groupPollTimeout)
		fetches := m.cl.PollFetches(pollCtx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			m.g.h.ObserveGroup(m.g.name, m.session(r.Partition), r.Partition, r.Offset, string(r.Value))
			m.records.Add(1)
		})
		fetches.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil && pollCtx.Err() == nil {
				m.noteErr("fetch: %v", err)
			}
		})
		m.commit(context.Background())
		m.cl.AllowRebalance()
	}
}

// commit commits every offset read and not yet committed, and records the
// partitions the coordinator acknowledged.
func (m *groupMember) commit(parent context.Context) {
	offsets := m.cl.UncommittedOffsets()
	if len(offsets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(parent, groupCommitTimeout)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			m.commitErrs.Add(1)
			m.noteErr("commit: %v", err)
			return
		}
		m.recordAcked(req, resp)
	})
}

// recordAcked records each partition of resp without an error, at the
// offset req committed for it.
func (m *groupMember) recordAcked(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	for _, c := range commitOutcomes(req, resp) {
		if c.err != nil {
			m.commitErrs.Add(1)
			m.noteErr("commit p%d: %v", c.partition, c.err)
			continue
		}
		m.g.h.CommitAcked(m.g.name, c.partition, c.offset)
		m.commits.Add(1)
	}
}

func (m *groupMember) noteErr(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.mu.firstErrs) < 3 {
		m.mu.firstErrs = append(m.mu.firstErrs, fmt.Sprintf(format, args...))
	}
}

// close stops the member: a last commit, then Close (which leaves the
// group).
func (m *groupMember) close() {
	m.stop()
	<-m.done
	m.commit(context.Background())
	m.cl.Close()
}

// stopChurn ends the replacing of members (idempotent).
func (g *soakGroup) stopChurn() {
	g.stop()
	<-g.done
}

// close stops the churn and every member.
func (g *soakGroup) close() {
	g.stopChurn()
	g.mu.Lock()
	members := g.mu.members
	g.mu.Unlock()
	for _, m := range members {
		m.close()
	}
}

func (g *soakGroup) String() string {
	g.mu.Lock()
	all := append(append([]*groupMember{}, g.mu.retired...), g.mu.members...)
	retired := len(g.mu.retired)
	g.mu.Unlock()
	var records, commits, commitErrs int64
	assignments := 0
	var errs []string
	for _, m := range all {
		records, commits, commitErrs = records+m.records.Load(), commits+m.commits.Load(), commitErrs+m.commitErrs.Load()
		m.mu.Lock()
		for _, n := range m.mu.assignments {
			assignments += n
		}
		if len(errs) < 4 {
			errs = append(errs, m.mu.firstErrs...)
		}
		m.mu.Unlock()
	}
	return fmt.Sprintf("group %s (%s protocol): %d members (%d replaced); %d records read, %d partition assignments, "+
		"%d partition commits acknowledged, %d commit errors; first errors [%s]",
		g.name, g.protocol, len(all), retired, records, assignments, commits, commitErrs, strings.Join(errs, "; "))
}

// commitReader reads the groups' committed offsets every
// commitReadInterval, one OffsetFetch after the other, into H (the
// history's offset-regression rule needs one reader per group, in order).
type commitReader struct {
	c      *Cluster
	h      *history.History
	groups []string
	topic  string
	stop   context.CancelFunc
	done   chan struct{}
	adm    *kadm.Client

	mu struct {
		sync.Mutex
		latest map[string]map[int32]int64 // group -> partition -> last offset read
		reads  int
		failed int
	}
}

func startCommitReader(c *Cluster, h *history.History, topic string, groups ...string) *commitReader {
	ctx, cancel := context.WithCancel(context.Background())
	cr := &commitReader{c: c, h: h, groups: groups, topic: topic, stop: cancel, done: make(chan struct{}), adm: kadm.NewClient(c.Client())}
	cr.mu.latest = map[string]map[int32]int64{}
	go cr.run(ctx)
	c.t.Cleanup(cr.finish)
	return cr
}

func (cr *commitReader) run(ctx context.Context) {
	defer close(cr.done)
	tick := time.NewTicker(commitReadInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, g := range cr.groups {
			cr.read(ctx, g, cr.h.CommitRead)
		}
	}
}

// read fetches group's committed offsets of the topic and hands each to
// record; it reports whether the fetch succeeded.
func (cr *commitReader) read(ctx context.Context, group string, record func(group string, p int32, offset int64)) bool {
	ctx, cancel := context.WithTimeout(ctx, commitReadTimeout)
	defer cancel()
	resp, err := cr.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.mu.reads++
	if err != nil {
		cr.mu.failed++
		return false
	}
	if cr.mu.latest[group] == nil {
		cr.mu.latest[group] = map[int32]int64{}
	}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == cr.topic && o.At >= 0 {
			record(group, o.Partition, o.At)
			cr.mu.latest[group][o.Partition] = o.At
		}
	})
	return true
}

// behind lists the partitions whose last committed offset read is below
// ends ("" when every group reached them).
func (cr *commitReader) behind(ends map[int32]int64) string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	var out []string
	for _, g := range cr.groups {
		for p, end := range ends {
			if got, ok := cr.mu.latest[g][p]; end > 0 && (!ok || got < end) {
				out = append(out, fmt.Sprintf("%s p%d at %d of %d", g, p, got, end))
			}
		}
	}
	return strings.Join(out, ", ")
}

// waitCaughtUp waits until every group committed ends.
func (cr *commitReader) waitCaughtUp(ends map[int32]int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		behind := cr.behind(ends)
		if behind == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("groups did not commit every end offset within %v: %s", timeout, behind)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// finish stops the periodic reads (idempotent).
func (cr *commitReader) finish() {
	cr.stop()
	<-cr.done
}

// readFinal stops the periodic reads and records each group's committed
// offsets once more as final, retrying until a fetch succeeds.
func (cr *commitReader) readFinal(timeout time.Duration) error {
	cr.finish()
	deadline := time.Now().Add(timeout)
	for _, g := range cr.groups {
		for !cr.read(context.Background(), g, cr.h.FinalCommit) {
			if time.Now().After(deadline) {
				return fmt.Errorf("final committed offsets of %s not read within %v", g, timeout)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func (cr *commitReader) String() string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return fmt.Sprintf("committed offsets read %d times (%d failed); last %v", cr.mu.reads, cr.mu.failed, cr.mu.latest)
}
