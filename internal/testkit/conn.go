package testkit

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrClientKilled is what ConnTracker.Dial returns after Kill.
var ErrClientKilled = errors.New("client killed")

// ConnTracker is a kgo Dialer (pass Dial to kgo.Dialer) that remembers its
// connections, so that a test can reset them all at once as a crashing
// client process would. The zero value is ready to use.
type ConnTracker struct {
	mu    sync.Mutex
	conns []net.Conn // every connection dialled, open or not
	dead  bool       // Kill was called: no new connection
}

// Dial opens a TCP connection and remembers it, unless Kill was called.
func (ct *ConnTracker) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	ct.mu.Lock()
	dead := ct.dead
	ct.mu.Unlock()
	if dead {
		return nil, ErrClientKilled
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.dead { // Kill ran while this dial was under way
		conn.Close()
		return nil, ErrClientKilled
	}
	ct.conns = append(ct.conns, conn)
	return conn, nil
}

// Kill resets every connection (SO_LINGER 0, so the peer sees a reset, not
// an orderly close) and refuses new ones.
func (ct *ConnTracker) Kill() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.dead = true
	for _, c := range ct.conns {
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		c.Close()
	}
}
