package broker

// A replica that becomes leader while its local log ends below the
// partition's tiered end (an empty disk after a restore or a disk loss)
// first restarts its log at that end (tier.Manifest.RestartOffset), so its
// first new record gets the next offset after the bucket's and never
// reuses a tiered offset.

import (
	"github.com/strata-log/strata/replication"
)

// leaderRestart is the log restart a replica about to lead needs: at
// offset, with snap as the producer state there (nil: empty). The zero
// value (offset 0) means none.
type leaderRestart struct {
	offset int64
	snap   []byte
}

// tieredRestartOffset is where p must restart its log before leading;
// false if it need not.
func tieredRestartOffset(p *partition) (int64, bool) {
	return p.manifest.RestartOffset(tp(p), p.log.LogEndOffset())
}

// prepareLeaderRestart decides, before the replica mutex is taken, whether
// p must restart its log before leading, and reads the producer state at
// the restart offset from the tiered object ending there (a bucket GET
// bounded by snapshotReadTimeout; without one the restart starts with
// empty producer state, logged). A replica already leading needs none.
// Called under b.parts.applyMu: a slow bucket delays the application of
// later partition states by at most snapshotReadTimeout, and only when a
// restart is due (rare: an empty or lagging disk taking leadership).
func (b *Broker) prepareLeaderRestart(p *partition) leaderRestart {
	if p.isLeader() {
		return leaderRestart{}
	}
	offset, need := tieredRestartOffset(p)
	if !need {
		return leaderRestart{}
	}
	snap := restartSnapshot(b.lifetime, b.log, b.tieredProducerSnapshot, p, offset, "leader log restart at the tiered end")
	return leaderRestart{offset: offset, snap: snap}
}

// restartAtTieredEndLocked restarts p's log at the tiered end before r
// becomes leader, when its local log still ends below it: nothing below
// the end is then served from (absent) local data, and the cold path
// serves it from the bucket. prep is prepareLeaderRestart's answer; if the
// end moved since, the restart goes to the new end without a snapshot.
// REQUIRES: p.replica.mu held, r not leading.
func (b *Broker) restartAtTieredEndLocked(p *partition, r *replication.Replica, prep leaderRestart) error {
	if r.Role() == replication.RoleLeader {
		return nil
	}
	offset, need := tieredRestartOffset(p)
	if !need {
		return nil
	}
	snap := prep.snap
	if prep.offset != offset {
		snap = nil
	}
	from := p.log.LogEndOffset()
	if err := restartLog(b.log, p, offset, snap, "leader log restart at the tiered end"); err != nil {
		return err
	}
	b.log.Info("log restarted at the tiered end before leading: history below it is in the bucket",
		"topic", p.topic, "partition", p.index, "from", from, "to", offset, "producer_state", snap != nil)
	return nil
}
