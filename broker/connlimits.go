package broker

// Transport hardening (issue 9): connection limits at accept (Kafka's
// max.connections and max.connections.per.ip), a broker-wide bound on the
// bytes of requests read but not yet handled (queued.max.request.bytes),
// and the KIP-219 mute of a throttled connection.

import (
	"context"
	"sync"
	"time"
)

// ConnStats counts connections refused by the limits (for metrics).
type ConnStats struct {
	Open         int   // connections being served
	RefusedTotal int64 // refused because MaxConnections was reached
	RefusedPerIP int64 // refused because MaxConnectionsPerIP was reached
}

// connCounts is the accounting of open connections. Guarded by
// Broker.conns.mu.
type connCounts struct {
	open         int
	perIP        map[string]int
	refusedTotal int64
	refusedPerIP int64
}

// admitLocked takes a connection slot for host, or reports why not. As in
// Kafka, the broker-wide limit does not apply to a separate inter-broker
// listener (clients filling the broker must not cut replication off);
// connections there still count, and the per-IP limit applies everywhere.
// REQUIRES: b.conns.mu held.
func (b *Broker) admitLocked(host, listenerName string) bool {
	cc := &b.conns.counts
	if cc.perIP == nil {
		cc.perIP = map[string]int{}
	}
	protected := len(b.listeners) > 1 && listenerName == b.cfg.interBrokerListener()
	switch {
	case b.cfg.MaxConnections > 0 && cc.open >= b.cfg.MaxConnections && !protected:
		cc.refusedTotal++
		return false
	case b.cfg.MaxConnectionsPerIP > 0 && cc.perIP[host] >= b.cfg.MaxConnectionsPerIP:
		cc.refusedPerIP++
		return false
	}
	cc.open++
	cc.perIP[host]++
	return true
}

// releaseLocked gives back the slot of a connection from host.
// REQUIRES: b.conns.mu held.
func (b *Broker) releaseLocked(host string) {
	cc := &b.conns.counts
	cc.open--
	if cc.perIP[host]--; cc.perIP[host] <= 0 {
		delete(cc.perIP, host)
	}
}

// ConnStats returns the connection counts.
func (b *Broker) ConnStats() ConnStats {
	b.conns.mu.Lock()
	defer b.conns.mu.Unlock()
	cc := b.conns.counts
	return ConnStats{Open: cc.open, RefusedTotal: cc.refusedTotal, RefusedPerIP: cc.refusedPerIP}
}

// byteBudget bounds the bytes of requests read but not yet handled, across
// the broker. A reader waits for room before it allocates a frame. One
// frame larger than the whole budget is let through when nothing else is
// held, so it cannot wait forever.
type byteBudget struct {
	limit int64 // <= 0: unbounded
	mu    sync.Mutex
	used  int64         // guarded by mu
	freed chan struct{} // guarded by mu; closed and replaced at every release
}

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{limit: limit, freed: make(chan struct{})}
}

// acquire waits until n bytes fit, or ctx ends (false then).
func (q *byteBudget) acquire(ctx context.Context, n int64) bool {
	if q.limit <= 0 {
		return true
	}
	for {
		q.mu.Lock()
		if q.used == 0 || q.used+n <= q.limit {
			q.used += n
			q.mu.Unlock()
			return true
		}
		freed := q.freed
		q.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// release gives back n bytes taken by acquire.
func (q *byteBudget) release(n int64) {
	if q.limit <= 0 || n == 0 {
		return
	}
	q.mu.Lock()
	q.used -= n
	close(q.freed)
	q.freed = make(chan struct{})
	q.mu.Unlock()
}

// inUse is the bytes held (tests, metrics).
func (q *byteBudget) inUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// maxThrottleMute bounds one mute, whatever a quota asked for.
const maxThrottleMute = 30 * time.Second

// mute stops the connection's reader for throttleMs after a throttled
// response was written (KIP-219: the client waits too, so a compliant
// client never notices). Called by the writer. Requests the client
// pipelined before the throttled answer, already read, are not held back:
// at most MaxInFlightRequests of them.
func (c *conn) mute(throttleMs int32) {
	if throttleMs <= 0 {
		return
	}
	d := min(time.Duration(throttleMs)*time.Millisecond, maxThrottleMute)
	c.mutedUntil.Store(time.Now().Add(d).UnixNano())
}

// waitUnmuted holds the reader until the mute ends or the connection
// closes. Called by the reader before it serves the next request.
func (c *conn) waitUnmuted() {
	until := c.mutedUntil.Load()
	if until == 0 {
		return
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}
