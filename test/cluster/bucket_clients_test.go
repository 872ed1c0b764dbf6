package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/test/history"
)

// Bounds of the timed clients' shutdown.
const (
	timedFlushTimeout = 30 * time.Second // a clean stop's flush of buffered records
	timedCloseTimeout = 20 * time.Second // Close of a client whose brokers may be dead
)

// ackedRecord is one acknowledged record and when its producer learnt of
// the acknowledgement (the callback's clock, a little after the broker's
// high watermark covered the record).
type ackedRecord struct {
	Partition int32
	Offset    int64
	Value     string
	AckedAt   time.Time
}

// timedProducer is an idempotent acks=all producer writing rate records per
// second to each partition of a topic, round-robin, and keeping every
// acknowledged record with its acknowledgement time. With a history, every
// attempt and outcome is recorded there too (producer name "timed").
type timedProducer struct {
	c          *Cluster
	topic      string
	partitions int32
	h          *history.History // may be nil
	cl         *kgo.Client
	stop       context.CancelFunc
	done       chan struct{}

	mu struct {
		sync.Mutex
		acked    []ackedRecord // in acknowledgement order
		unknown  int
		firstErr string
	}
}

// startTimedProducer starts producing rate records per second per
// partition; each value is "timed-<seq>" padded to valueSize bytes.
func startTimedProducer(c *Cluster, h *history.History, topic string, partitions int32, rate, valueSize int) *timedProducer {
	p := &timedProducer{c: c, topic: topic, partitions: partitions, h: h, done: make(chan struct{})}
	p.cl = c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(maxBuffered), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go p.run(ctx, time.Second/time.Duration(rate*int(partitions)), valueSize)
	return p
}

func (p *timedProducer) run(ctx context.Context, every time.Duration, valueSize int) {
	defer close(p.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if p.cl.BufferedProduceRecords() >= maxBuffered/2 {
			continue // the cluster is not keeping up: skip, so Produce never blocks
		}
		value := timedValue(seq, valueSize)
		partition := int32(seq % int(p.partitions))
		if p.h != nil {
			p.h.Produce("timed", value, "", partition)
		}
		// The records' context is not ctx: stopping the loop must not fail
		// what is in flight (abandon and Close end those).
		p.cl.Produce(context.Background(), &kgo.Record{Partition: partition, Value: []byte(value)}, p.produced)
	}
}

// timedValue is record seq's value: unique, and its sequence readable back
// (timedSeq), so that order can be checked on any read of the log.
func timedValue(seq, size int) string {
	v := fmt.Sprintf("timed-%09d", seq)
	return v + strings.Repeat("x", max(0, size-len(v)))
}

// timedSeq reads the sequence number back from a timedValue (-1 if v is
// not one).
func timedSeq(v string) int {
	var seq int
	if _, err := fmt.Sscanf(v, "timed-%09d", &seq); err != nil {
		return -1
	}
	return seq
}

func (p *timedProducer) produced(r *kgo.Record, err error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.mu.unknown++ // after an error the record may still exist
		if p.mu.firstErr == "" {
			p.mu.firstErr = err.Error()
		}
		if p.h != nil {
			p.h.Unknown(string(r.Value))
		}
		return
	}
	p.mu.acked = append(p.mu.acked, ackedRecord{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), AckedAt: now})
	if p.h != nil {
		p.h.Ack(string(r.Value), r.Partition, r.Offset)
	}
}

// acked returns a copy of the records acknowledged so far.
func (p *timedProducer) acked() []ackedRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ackedRecord(nil), p.mu.acked...)
}

func (p *timedProducer) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d acknowledged, %d unknown (first error: %q)", len(p.mu.acked), p.mu.unknown, p.mu.firstErr)
}

// finish stops producing and waits, bounded, for what is buffered.
func (p *timedProducer) finish() error {
	p.stop()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), timedFlushTimeout)
	defer cancel()
	_ = p.cl.Flush(ctx) // on timeout the rest fail as unknown at Close
	return p.close()
}

// abandon stops producing and closes the client at once, failing what is
// in flight as unknown: a producer whose cluster just died.
func (p *timedProducer) abandon() error {
	p.stop()
	<-p.done
	return p.close()
}

func (p *timedProducer) close() error {
	return closeWithin(p.cl, timedCloseTimeout)
}

// closeWithin closes cl (leaving its group, if any, without waiting for
// an answer) and reports a Close that does not return within timeout: a
// client left running could reconnect to a later cluster on the same
// addresses.
func closeWithin(cl *kgo.Client, timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		_ = cl.LeaveGroupContext(canceled) // a no-op outside a group; makes Close immediate inside one
		cl.Close()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("client not closed within %v", timeout)
	}
}

// timedCommit is a committed offset acknowledged by the group coordinator
// and when the member learnt of it.
type timedCommit struct {
	Offset int64
	At     time.Time
}

// committingGroup is a one-member consumer group (classic protocol) that
// reads a topic from its start and commits after every poll, keeping per
// partition every acknowledged commit with its time.
type committingGroup struct {
	name, topic string
	cl          *kgo.Client
	stop        context.CancelFunc
	done        chan struct{}

	mu struct {
		sync.Mutex
		records  int64
		commits  map[int32][]timedCommit // in acknowledgement order
		firstErr string
	}
}

func startCommittingGroup(c *Cluster, name, topic string) *committingGroup {
	g := &committingGroup{name: name, topic: topic, done: make(chan struct{})}
	g.mu.commits = map[int32][]timedCommit{}
	g.cl = c.Client(kgo.ConsumerGroup(name), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(groupHeartbeatPeriod))
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go g.run(ctx)
	return g
}

func (g *committingGroup) run(ctx context.Context) {
	defer close(g.done)
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, groupPollTimeout)
		fetches := g.cl.PollFetches(pollCtx)
		cancel()
		g.mu.Lock()
		g.mu.records += int64(fetches.NumRecords())
		g.mu.Unlock()
		g.commit(ctx)
	}
}

// commit commits what was polled and records the partitions the
// coordinator acknowledged.
func (g *committingGroup) commit(parent context.Context) {
	offsets := g.cl.UncommittedOffsets()
	if len(offsets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(parent, groupCommitTimeout)
	defer cancel()
	g.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			g.noteErr(err)
			return
		}
		g.recordAcked(req, resp, time.Now())
	})
}

// recordAcked keeps each partition of resp without an error at the offset
// req committed for it.
func (g *committingGroup) recordAcked(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range commitOutcomes(req, resp) {
		if c.err != nil {
			g.noteErrLocked(c.err)
			continue
		}
		g.mu.commits[c.partition] = append(g.mu.commits[c.partition], timedCommit{c.offset, at})
	}
}

func (g *committingGroup) noteErr(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.noteErrLocked(err)
}

// REQUIRES: g.mu held.
func (g *committingGroup) noteErrLocked(err error) {
	if g.mu.firstErr == "" {
		g.mu.firstErr = err.Error()
	}
}

// committedBy returns, per partition, the highest offset whose commit was
// acknowledged at or before t (partitions with none are absent).
func (g *committingGroup) committedBy(t time.Time) map[int32]timedCommit {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]timedCommit{}
	for p, commits := range g.mu.commits {
		for _, cm := range commits {
			if !cm.At.After(t) && cm.Offset >= out[p].Offset {
				out[p] = cm
			}
		}
	}
	return out
}

func (g *committingGroup) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, commits := range g.mu.commits {
		n += len(commits)
	}
	return fmt.Sprintf("group %s: %d records read, %d partition commits acknowledged (first error: %q)",
		g.name, g.mu.records, n, g.mu.firstErr)
}

// finish stops the member after a last commit and closes it, bounded.
func (g *committingGroup) finish() error {
	g.stop()
	<-g.done
	g.commit(context.Background())
	return closeWithin(g.cl, timedCloseTimeout)
}

// abandon stops the member and closes it without a last commit: a member
// whose cluster just died.
func (g *committingGroup) abandon() error {
	g.stop()
	<-g.done
	return closeWithin(g.cl, timedCloseTimeout)
}
