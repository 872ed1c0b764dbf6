package cluster

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds a proxy's dial of its target.
const dialTimeout = 2 * time.Second

// Proxy is a TCP forwarder on 127.0.0.1 towards one target address that
// can be cut (blackholed) and healed. Safe for concurrent use.
type Proxy struct {
	Name   string
	target string
	ln     net.Listener

	mu struct {
		sync.Mutex
		cut    bool
		closed bool
		// live holds both ends of every forwarded connection; held holds
		// connections accepted while cut, kept open and silent.
		live map[net.Conn]struct{}
		held map[net.Conn]struct{}
	}
	wg sync.WaitGroup // accept loop and pipes
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(name, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Name: name, target: target, ln: ln}
	p.mu.live = map[net.Conn]struct{}{}
	p.mu.held = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every forwarded connection and holds new ones silently until
// Heal: peers see resets, then connections that never answer.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mu.cut = true
	live := p.mu.live
	p.mu.live = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range live {
		c.Close()
	}
}

// Heal forwards again; connections held while cut are closed so that their
// owners reconnect.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mu.cut = false
	held := p.mu.held
	p.mu.held = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range held {
		c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	conns := []net.Conn{}
	for c := range p.mu.live {
		conns = append(conns, c)
	}
	for c := range p.mu.held {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		p.wg.Add(1)
		go p.serve(conn)
	}
}

// serve forwards one accepted connection, or holds it while cut.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if p.hold(client) {
		return
	}
	upstream, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, upstream) {
		client.Close()
		upstream.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	<-done // either direction ending ends both: no half-open links
	client.Close()
	upstream.Close()
	<-done
	p.untrack(client, upstream)
}

// hold keeps conn open and silent if the proxy is cut (or closes it if the
// proxy is closed); it reports whether conn was taken.
func (p *Proxy) hold(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.mu.closed:
		conn.Close()
		return true
	case p.mu.cut:
		p.mu.held[conn] = struct{}{}
		return true
	}
	return false
}

// track registers a forwarded pair unless the proxy got cut or closed while
// dialling.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cut || p.mu.closed {
		return false
	}
	for _, c := range conns {
		p.mu.live[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.mu.live, c)
	}
}
