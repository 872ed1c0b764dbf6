package hotlog

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// flushDriver decides when a log's flush rounds run. Today each log owns a
// groupFlusher goroutine; a cross-partition group commit could replace
// it with one driver that runs flushRound for many logs together.
type flushDriver interface {
	// schedule asks for a flush round soon (data appended or a segment sealed).
	// It never blocks.
	schedule()
	// stop ends the driver; no flush round runs after it returns.
	stop()
}

// groupFlusher runs flush rounds on its own goroutine. Appends that arrive
// while a round is in progress are all covered by the next round: that is the
// group commit.
//
// interval spaces the rounds of a busy log: when appends arrived while the
// previous round ran, the next starts interval after the previous one
// started, so a busy log fsyncs at most once per interval and every append
// in between shares that fsync. Otherwise (a quiet log, or a producer that
// waits for each ack before sending on) the round starts at once: spacing
// then would only add latency, with nothing to share the fsync. Why: a
// producer pipelining one record per request at 20,000/s got one fdatasync
// for every record or two, about half of the broker's CPU.
type groupFlusher struct {
	round    func()
	interval time.Duration
	wake     chan struct{} // capacity 1: a pending wake-up
	quit     chan struct{}
	done     chan struct{}
}

var _ flushDriver = (*groupFlusher)(nil)

func startGroupFlusher(round func(), interval time.Duration) *groupFlusher {
	f := &groupFlusher{round: round, interval: interval,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *groupFlusher) schedule() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *groupFlusher) stop() {
	close(f.quit)
	<-f.done
}

func (f *groupFlusher) run() {
	defer close(f.done)
	var last time.Time // when the previous round started
	busy := false      // appends arrived while the previous round ran
	var timer *time.Timer
	for {
		select {
		case <-f.quit:
			return
		case <-f.wake:
		}
		if wait := f.interval - time.Since(last); busy && wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-f.quit:
				return
			case <-timer.C:
			}
		}
		last = time.Now()
		f.round()
		busy = len(f.wake) > 0
	}
}

// slowFlush is how long a flush round may take before it is logged.
const slowFlush = 2 * time.Second

// fdatasync is the default Log.syncFile.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// flushPlan is what one flush round must make durable.
type flushPlan struct {
	target  int64      // LEO when the round started
	sealed  []*segment // sealed since the last round: log + index files, then dir
	active  *segment   // nil if nothing to sync in it
	persist bool       // write the recovery-point checkpoint after syncing
}

// flushRound makes everything appended so far durable (DurabilityFsync) or
// the segments sealed so far (DurabilityReplication), then publishes the new
// flushed offset and recovery point.
func (l *Log) flushRound() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	plan, ok := l.planFlush()
	if !ok {
		return
	}
	start := time.Now()
	n, err := l.syncPlan(plan)
	if err != nil {
		l.fail(err)
		return
	}
	if took := time.Since(start); took > slowFlush {
		// acks=all writes and consumers (fsync durability) wait for this.
		l.logger.Warn("hotlog: slow flush", "dir", l.dir, "took", took, "fsyncs", n, "target", plan.target)
	}
	l.mu.Lock()
	l.mu.stats.Fsyncs += n
	l.mu.stats.FlushRounds++
	if l.durability == DurabilityFsync {
		l.mu.flushedOffset = max(l.mu.flushedOffset, plan.target)
		l.mu.recoveryPoint = max(l.mu.recoveryPoint, plan.target)
	} else if len(plan.sealed) > 0 {
		l.mu.recoveryPoint = max(l.mu.recoveryPoint, plan.sealed[len(plan.sealed)-1].next)
	}
	point := l.mu.recoveryPoint
	persist := l.durability == DurabilityReplication || l.now().Sub(l.mu.lastCheckpoint) >= recoveryCheckpointInterval
	if persist {
		l.mu.lastCheckpoint = l.now()
	}
	l.notifyLocked()
	l.mu.Unlock()
	if persist {
		if err := writeOffsetCheckpoint(l.dir, recoveryPointFile, point); err != nil {
			l.fail(err)
		}
	}
}

// planFlush takes the work of a round. REQUIRES: flushMu held.
func (l *Log) planFlush() (flushPlan, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.err != nil || l.mu.closed {
		return flushPlan{}, false
	}
	p := flushPlan{target: l.leoLocked(), sealed: l.mu.unsynced}
	l.mu.unsynced = nil
	if l.durability == DurabilityFsync && l.mu.flushedOffset < p.target {
		p.active = l.activeLocked()
	}
	return p, len(p.sealed) > 0 || p.active != nil
}

// syncPlan fsyncs the plan's files and returns how many fsyncs it issued.
// REQUIRES: flushMu held (so no file in the plan is closed under it).
func (l *Log) syncPlan(p flushPlan) (int64, error) {
	var n int64
	for _, s := range p.sealed {
		for _, f := range []*os.File{s.file, s.indexFile, s.timeFile} {
			if f == nil {
				continue
			}
			if err := l.syncFile(f); err != nil {
				return n, err
			}
			n++
		}
		if err := s.closeIndexFiles(); err != nil {
			return n, err
		}
	}
	if p.active != nil {
		if err := l.syncFile(p.active.file); err != nil {
			return n, err
		}
		n++
	}
	if len(p.sealed) > 0 {
		// The new segment's directory entry must be durable too.
		return n, syncDir(l.dir)
	}
	return n, nil
}
