package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// ServerConfig is what a Server needs; every field is required.
type ServerConfig struct {
	// Log is the parent of every connection's logger.
	Log *slog.Logger
	// MaxInFlightRequests bounds the requests of one connection read and
	// not yet answered (> 0).
	MaxInFlightRequests int
	// Versions is the served version range of every API key.
	Versions VersionsFunc
	// Budget bounds the bytes of requests read and not yet handled, across
	// the server (queued.max.request.bytes).
	Budget *ByteBudget
	// Limiter admits connections at accept (max.connections,
	// max.connections.per.ip).
	Limiter *ConnLimiter
}

// ErrInvalidServerConfig reports a ServerConfig field missing or out of
// range.
var ErrInvalidServerConfig = errors.New("wire: invalid server config")

// Validate reports the first field missing or out of range.
func (c ServerConfig) Validate() error {
	switch {
	case c.Log == nil:
		return fmt.Errorf("%w: no Log", ErrInvalidServerConfig)
	case c.MaxInFlightRequests <= 0:
		return fmt.Errorf("%w: MaxInFlightRequests %d", ErrInvalidServerConfig, c.MaxInFlightRequests)
	case c.Versions == nil:
		return fmt.Errorf("%w: no Versions", ErrInvalidServerConfig)
	case c.Budget == nil:
		return fmt.Errorf("%w: no Budget", ErrInvalidServerConfig)
	case c.Limiter == nil:
		return fmt.Errorf("%w: no Limiter", ErrInvalidServerConfig)
	}
	return nil
}

// Listener is one listener's part in accepting connections.
type Listener struct {
	// Name labels the listener's connections in logs.
	Name string
	// TLS, when set, is the server side of a TLS handshake every
	// connection runs before its first request.
	TLS *tls.Config
	// ExemptFromMaxConnections skips the broker-wide connection limit (a
	// separate inter-broker listener; see ConnLimiter.Admit).
	ExemptFromMaxConnections bool
	// NewSession starts the broker's side of a connection once its TLS
	// handshake, if any, is done; ctx ends when the connection closes.
	NewSession func(ctx context.Context, info ConnInfo) Session
}

// Server runs the connections of a broker's listeners: it admits them
// within the connection limits, serves each with a Conn, and drains them
// on shutdown.
type Server struct {
	cfg ServerConfig // read-only after NewServer
	// stats are the per-API request counters (atomics).
	stats RequestStats
	// handlerCtx is the parent of every connection's context; it ends
	// when a drain's deadline passes, or at Close.
	handlerCtx     context.Context
	cancelHandlers context.CancelFunc
	inflight       sync.WaitGroup // handler goroutines
	conns          sync.WaitGroup // one per serving connection
	mu             struct {
		sync.Mutex
		set     map[*Conn]struct{}
		closing bool // a drain began: new connections are closed at once
	}
}

// NewServer returns a server that has no connections yet.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	s.mu.set = map[*Conn]struct{}{}
	s.handlerCtx, s.cancelHandlers = context.WithCancel(context.Background())
	return s, nil
}

// Accept accepts the connections of ln until ln closes.
func (s *Server) Accept(ln net.Listener, lis *Listener) {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE...): back off instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Log.Warn("accept failed", "listener", lis.Name, "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.startConn(nc, lis)
	}
}

// startConn registers and serves a connection, unless a drain has begun
// or the connection limits are reached (it is closed at once then).
func (s *Server) startConn(nc net.Conn, lis *Listener) {
	host := RemoteHost(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		_ = nc.Close()
		return
	}
	if !s.cfg.Limiter.Admit(host, lis.ExemptFromMaxConnections) {
		s.cfg.Log.Debug("connection refused by the connection limits", "remote", nc.RemoteAddr().String(), "listener", lis.Name)
		_ = nc.Close()
		return
	}
	c := newConn(s, nc, lis, host)
	s.mu.set[c] = struct{}{}
	s.conns.Add(1)
	go func() {
		defer s.conns.Done()
		c.serve()
		s.mu.Lock()
		delete(s.mu.set, c)
		s.cfg.Limiter.Release(host)
		s.mu.Unlock()
	}()
}

// Drain stops reading on every connection and waits for the requests in
// flight to be answered, until ctx ends; then it cancels the handlers and
// closes what is left. Connections accepted from then on are closed at
// once.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closing = true
	for c := range s.mu.set {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.cancelHandlers()
	s.mu.Lock()
	for c := range s.mu.set {
		c.close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}

// Close cancels the handlers still running and waits for them, at most
// wait (handlers that ignore their context must not hang shutdown).
func (s *Server) Close(wait time.Duration) {
	s.cancelHandlers()
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
}

// RequestMetrics returns the request counters of every API key that has
// served at least one request, in key order.
func (s *Server) RequestMetrics() []APIMetrics { return s.stats.Snapshot() }
