package broker

import (
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/replication"
)

// moveThrottle is the broker's replication.MoveThrottle, shared by the
// fetch handlers. Kafka has a leader rate and a follower rate; Strata
// throttles on the leader only, at the lower of the two, which bounds the
// same bytes (what a move copies) whichever side an operator sets.
type moveThrottle struct {
	mu sync.Mutex
	t  replication.MoveThrottle
}

func (m *moveThrottle) setRate(bytesPerSecond int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t.SetRate(bytesPerSecond, time.Now().UnixMilli())
}

// allow says whether replica's fetch of p may be served now and with at
// most how many bytes (0: no limit): only replicas being added to p are
// throttled.
func (m *moveThrottle) allow(p *partition, replica int32) (ok bool, limit int) {
	if !slices.Contains(p.replicatedState().AddingReplicas, replica) {
		return true, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.Allow(time.Now().UnixMilli())
}

func (m *moveThrottle) charge(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t.Charge(n, time.Now().UnixMilli())
}

// throttleRate is the lower positive of the two rates (0: unlimited).
func throttleRate(leader, follower int64) int64 {
	switch {
	case leader <= 0:
		return max(follower, 0)
	case follower <= 0:
		return leader
	}
	return min(leader, follower)
}
