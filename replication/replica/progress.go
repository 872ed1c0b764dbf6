package replica

// A leader's local log progress (appends, and flushes with fsync
// durability) reported to its replica: by the log watcher as it happens,
// by the leader's own append path (ReportLocalLogLocked), and by Tick as a
// safety net.

import (
	"errors"
	"time"

	"github.com/strata-log/strata/replication"
)

// StartLogWatcher starts the goroutine that reports the local log's
// progress to the replica while it leads: the flusher's progress (Flushed,
// fsync durability) and appends that bypass the leader's append path. It
// ends at Retire or when the shell's lifetime ends.
func (c *Core) StartLogWatcher() {
	c.shell.Go(func() {
		for {
			ch := c.log.Changed()
			if c.IsLeader() {
				c.reportLocalLog()
			}
			select {
			case <-ch:
			case <-c.leading:
			case <-c.stop:
				return
			case <-c.shell.cfg.Lifetime.Done():
				return
			}
		}
	})
}

// reportLocalLog feeds a leader's LEO and flushed offset to its replica.
// Both are read under the replica's lock, so successive reports never go
// backwards (a leader's log only grows).
func (c *Core) reportLocalLog() {
	if (!c.shell.cfg.Fsync || c.log.FlushedOffset() <= c.reportedFlushed.Load()) && c.log.LogEndOffset() <= c.reportedLEO.Load() {
		return
	}
	err := c.WithReplica(func(r *replication.Replica) error {
		if r.Role() != replication.RoleLeader {
			return nil
		}
		return c.ReportLocalLogLocked(r)
	})
	if err != nil && !errors.Is(err, ErrClosed) {
		c.shell.cfg.Logger.Warn("reporting log progress to replication", "topic", c.part.Topic, "partition", c.part.Index, "err", err)
	}
}

// ReportLocalLogLocked reports the log's LEO (and, with fsync durability,
// its flushed offset) to r.
// REQUIRES: inside WithReplica (c.mu held), r leading.
func (c *Core) ReportLocalLogLocked(r *replication.Replica) error {
	flushed := c.log.FlushedOffset() // first: flushed <= LEO read after it
	leo := c.log.LogEndOffset()
	if err := r.Append(leo); err != nil {
		return err
	}
	c.reportedLEO.Store(leo)
	if !c.shell.cfg.Fsync {
		return nil
	}
	if err := r.Flushed(flushed); err != nil {
		return err
	}
	c.reportedFlushed.Store(flushed)
	return nil
}

// Tick advances the replica's logical time by ms, after reporting log
// progress the watcher owed for a whole tick (reportMissedProgressLocked).
func (c *Core) Tick(ms int64) error {
	return c.WithReplica(func(r *replication.Replica) error {
		if err := c.ReportMissedProgressLocked(r); err != nil {
			return err
		}
		return r.Tick(ms)
	})
}

// owedReport is a leader's log progress the tick found unreported: mark
// identifies what had been reported then (reportedLEO+reportedFlushed; -1:
// nothing owed) and since is when the tick first saw it.
type owedReport struct {
	mark  int64
	since time.Time
}

// ReportMissedProgressLocked is a safety net under the log watcher: a
// leader whose log has been ahead of what its replica was told for a whole
// TickInterval of wall time (a change the watcher did not report) reports
// it now, so acks=all waiters and consumers never wait for a notification
// that will not come. Wall time, not the count of ticks: a tick loop held
// up by one slow partition checks the next ones twice in quick succession,
// and progress made just before both checks is no miss. It counts and logs
// when it reports (Stats.MissedProgress): the watcher should make it
// unnecessary, so a count above zero is a bug. Tick calls it.
// REQUIRES: inside WithReplica (c.mu held).
func (c *Core) ReportMissedProgressLocked(r *replication.Replica) error {
	if r.Role() != replication.RoleLeader {
		c.behind.mark = -1
		return nil
	}
	ahead := max(c.log.LogEndOffset()-c.reportedLEO.Load(), 0)
	if c.shell.cfg.Fsync {
		ahead = max(ahead, c.log.FlushedOffset()-c.reportedFlushed.Load())
	}
	if ahead == 0 {
		c.behind.mark = -1
		return nil
	}
	now := time.Now()
	if mark := c.reportedLEO.Load() + c.reportedFlushed.Load(); c.behind.mark != mark {
		c.behind = owedReport{mark: mark, since: now} // behind since now only: the watcher may be on it
		return nil
	}
	if now.Sub(c.behind.since) < TickInterval {
		return nil
	}
	c.shell.missedProgress.Add(1)
	c.shell.cfg.Logger.Warn("log progress not reported by the watcher; reporting from the tick", "topic", c.part.Topic,
		"partition", c.part.Index, "leo", c.log.LogEndOffset(), "flushed", c.log.FlushedOffset(),
		"reported_leo", c.reportedLEO.Load(), "reported_flushed", c.reportedFlushed.Load(), "behind_for", now.Sub(c.behind.since))
	return c.ReportLocalLogLocked(r)
}
