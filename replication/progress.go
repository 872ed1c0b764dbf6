package replication

// progress is the leader's view of one follower, as Kafka's ReplicaState
// (and etcd raft's tracker.Progress). Owned by the leaderState holding it.
type progress struct {
	// leo is the follower's last fetch offset: every offset below it is in
	// its log (and, with fsync durability, on its disk). -1: unknown since
	// this replica became leader.
	leo int64
	// lastCaughtUpMs is the last logical time at which the follower was
	// known to have everything the leader had: the ISR shrink rule compares
	// it with replica.lag.time.max.ms. -1: never.
	lastCaughtUpMs int64
	// lastFetchMs and lastFetchLeaderLEO are the time of the previous fetch
	// and the leader's LEO then; -1 before the first fetch in this term.
	lastFetchMs        int64
	lastFetchLeaderLEO int64
}

// newProgress is a follower's state when this replica becomes leader.
// Members of the ISR count as caught up now (Kafka's resetReplicaState), so
// they get a full lag period before they can be removed.
func newProgress(inISR bool, nowMs int64) *progress {
	p := &progress{leo: -1, lastCaughtUpMs: -1, lastFetchMs: -1, lastFetchLeaderLEO: -1}
	if inISR {
		p.lastCaughtUpMs = nowMs
	}
	return p
}

// update records a fetch at fetchOffset when the leader's LEO is leaderLEO.
// Kafka's rule: reaching the leader's LEO makes the follower caught up now;
// reaching the LEO the leader had at the previous fetch makes it caught up
// as of that previous fetch. The second clause keeps a follower that is
// always one fetch behind a busy leader in the ISR.
func (p *progress) update(fetchOffset, leaderLEO, nowMs int64) {
	switch {
	case fetchOffset >= leaderLEO:
		p.lastCaughtUpMs = max(p.lastCaughtUpMs, nowMs)
	case p.lastFetchLeaderLEO >= 0 && fetchOffset >= p.lastFetchLeaderLEO:
		p.lastCaughtUpMs = max(p.lastCaughtUpMs, p.lastFetchMs)
	}
	p.leo = fetchOffset
	p.lastFetchLeaderLEO = leaderLEO
	p.lastFetchMs = nowMs
}

// inSync is the shrink test: a follower stays in the ISR while it is at
// the leader's LEO or was caught up within lagMaxMs.
func (p *progress) inSync(leaderLEO, nowMs, lagMaxMs int64) bool {
	if p.leo == leaderLEO {
		return true
	}
	return p.lastCaughtUpMs >= 0 && nowMs-p.lastCaughtUpMs <= lagMaxMs
}
