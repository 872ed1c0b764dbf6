package broker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// aLongTimeAgo is a read deadline in the past: it unblocks a pending Read.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one client connection. The reader goroutine (readLoop) owns br and
// lastProduce; the writer goroutine (writeLoop) owns writes to nc. Each slot
// is written by exactly one handler goroutine before it closes slot.done.
type conn struct {
	b      *Broker
	nc     net.Conn
	br     *bufio.Reader
	log    *slog.Logger
	queue  chan *slot // request order; capacity bounds requests in flight
	ctx    context.Context
	cancel context.CancelFunc
	// lastProduce is closed when the newest Produce so far releases its
	// turn; the next Produce waits on it (reader-owned).
	lastProduce chan struct{}
}

// slot is one request's place in the response order.
type slot struct {
	done chan struct{}
	// frame is the encoded response; nil for requests without a response.
	frame []byte
	// closeAfter: close the connection when the writer reaches this slot.
	closeAfter bool
}

func newConn(b *Broker, nc net.Conn, parent context.Context) *conn {
	ctx, cancel := context.WithCancel(parent)
	return &conn{
		b:      b,
		nc:     nc,
		br:     bufio.NewReaderSize(nc, 64<<10),
		log:    b.log.With("remote", nc.RemoteAddr().String()),
		queue:  make(chan *slot, b.cfg.MaxInFlightRequests),
		ctx:    ctx,
		cancel: cancel,
	}
}

// serve runs the connection until it closes; it returns once both loops
// have ended and the socket is closed.
func (c *conn) serve() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	c.readLoop()
	<-done
}

// readLoop reads, decodes and dispatches requests until the peer goes away,
// a request is invalid, or the broker stops reading (read deadline).
func (c *conn) readLoop() {
	defer close(c.queue)
	for {
		frame, err := readFrame(c.br, c.b.cfg.SocketRequestMaxBytes)
		if err != nil {
			c.logReadError(err)
			return
		}
		d, err := c.b.apis.decode(frame)
		if err != nil {
			c.log.Info("closing connection on bad request", "err", err)
			return
		}
		s := &slot{done: make(chan struct{})}
		select {
		case c.queue <- s:
		case <-c.ctx.Done():
			return
		}
		c.dispatch(d, s)
	}
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameTooSmall):
		c.log.Warn("closing connection on bad frame", "err", err)
	default:
		c.log.Debug("connection read ended", "err", err)
	}
}

// dispatch starts the request's handler. Produce requests are chained so
// that each starts only after the previous one of this connection released
// its turn.
func (c *conn) dispatch(d decodedRequest, s *slot) {
	if d.req == nil { // unsupported ApiVersions version: answer v0
		s.frame = appendResponseFrame(nil, d.hdr.correlationID, c.b.apiVersionsFallback())
		close(s.done)
		return
	}
	rc := &requestContext{
		conn:          c.nc,
		clientID:      d.hdr.clientID,
		correlationID: d.hdr.correlationID,
		apiKey:        d.hdr.apiKey,
		version:       d.hdr.version,
		principal:     anonymousPrincipal,
		host:          remoteHost(c.nc),
	}
	var prev chan struct{}
	if d.hdr.apiKey == produceKey {
		prev = c.lastProduce
		mine := make(chan struct{})
		c.lastProduce = mine
		rc.orderRelease = sync.OnceFunc(func() { close(mine) })
	}
	c.b.inflight.Add(1)
	go c.run(d, s, rc, prev)
}

// run executes one handler and fills its slot. A panic is recovered and
// closes this connection only.
func (c *conn) run(d decodedRequest, s *slot, rc *requestContext, prev chan struct{}) {
	defer c.b.inflight.Done()
	defer c.requestDone(d.hdr.apiKey, time.Now(), s)
	defer close(s.done)
	defer rc.releaseOrder()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panic", "api_key", d.hdr.apiKey, "version", d.hdr.version,
				"panic", r, "stack", string(debug.Stack()))
			s.frame, s.closeAfter = nil, true
		}
	}()
	if prev != nil {
		select {
		case <-prev:
		case <-c.ctx.Done():
			s.closeAfter = true
			return
		}
	}
	resp, err := d.entry.handle(c.ctx, rc, d.req)
	if err != nil {
		c.log.Info("closing connection on handler error", "api_key", d.hdr.apiKey, "err", err)
		s.closeAfter = true
		return
	}
	if resp == nil {
		return
	}
	resp.SetVersion(d.req.GetVersion())
	c.b.applyThrottle(rc, resp)
	s.frame = appendResponseFrame(make([]byte, 0, responseSizeHint(resp)), d.hdr.correlationID, resp)
}

// releaseOrder lets the next Produce request of the connection start. The
// connection calls it when the handler returns; a Produce handler may call
// it earlier, once its appends are done, to let pipelined requests overlap
// their waits. Safe to call more than once, and on any request.
func (rc *requestContext) releaseOrder() {
	if rc.orderRelease != nil {
		rc.orderRelease()
	}
}

// writeLoop writes responses in request order, then closes the connection.
func (c *conn) writeLoop() {
	defer c.close()
	for s := range c.queue {
		select {
		case <-s.done:
		case <-c.ctx.Done():
			return
		}
		if s.closeAfter {
			return
		}
		if s.frame == nil {
			continue
		}
		if _, err := c.nc.Write(s.frame); err != nil {
			c.log.Debug("connection write failed", "err", err)
			return
		}
	}
}

// close ends the connection: handler contexts are cancelled and a reader
// blocked in Read or on a full queue returns.
func (c *conn) close() {
	c.cancel()
	_ = c.nc.Close()
}

// stopReading makes the reader return at its next read, so the writer can
// drain the requests already in flight (graceful shutdown).
func (c *conn) stopReading() {
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
}

// remoteHost is the IP address of the connection's peer (its host for
// ACLs and per-IP limits), or the whole remote address if it has no port.
func remoteHost(nc net.Conn) string {
	addr := nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
