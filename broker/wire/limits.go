package wire

import "sync"

// ConnLimits are Kafka's max.connections and max.connections.per.ip; 0 is
// unbounded.
type ConnLimits struct {
	MaxConnections      int
	MaxConnectionsPerIP int
}

// ConnStats counts open connections and those refused by the limits (for
// metrics).
type ConnStats struct {
	Open         int   // connections being served
	RefusedTotal int64 // refused because MaxConnections was reached
	RefusedPerIP int64 // refused because MaxConnectionsPerIP was reached
}

// ConnLimiter admits connections at accept within ConnLimits and counts
// them until they are released. Safe for concurrent use.
type ConnLimiter struct {
	mu struct {
		sync.Mutex
		limits ConnLimits
		stats  ConnStats
		perIP  map[string]int // open connections by peer IP; no zero entries
	}
}

// NewConnLimiter returns a limiter enforcing limits.
func NewConnLimiter(limits ConnLimits) *ConnLimiter {
	l := &ConnLimiter{}
	l.mu.limits, l.mu.perIP = limits, map[string]int{}
	return l
}

// SetLimits replaces the limits for the connections admitted from now on
// (Kafka's dynamic max.connections and max.connections.per.ip): open
// connections over a lowered limit stay open.
func (l *ConnLimiter) SetLimits(limits ConnLimits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.limits = limits
}

// Limits returns the limits in force.
func (l *ConnLimiter) Limits() ConnLimits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.limits
}

// Admit takes a connection slot for host, or counts the refusal and
// returns false. exempt skips the broker-wide limit: as in Kafka, a
// separate inter-broker listener must not be cut off by clients filling
// the broker. Exempt connections still count, and the per-IP limit
// applies to every connection.
func (l *ConnLimiter) Admit(host string, exempt bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.mu.stats
	switch {
	case l.mu.limits.MaxConnections > 0 && s.Open >= l.mu.limits.MaxConnections && !exempt:
		s.RefusedTotal++
		return false
	case l.mu.limits.MaxConnectionsPerIP > 0 && l.mu.perIP[host] >= l.mu.limits.MaxConnectionsPerIP:
		s.RefusedPerIP++
		return false
	}
	s.Open++
	l.mu.perIP[host]++
	return true
}

// Release gives back the slot of a connection from host admitted by Admit.
func (l *ConnLimiter) Release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.stats.Open--
	if l.mu.perIP[host]--; l.mu.perIP[host] <= 0 {
		delete(l.mu.perIP, host)
	}
}

// Stats returns the connection counts.
func (l *ConnLimiter) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.stats
}
