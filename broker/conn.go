package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
)

// aLongTimeAgo is a read deadline in the past: it unblocks a pending Read.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one client connection. The reader goroutine (readLoop) owns br,
// auth and turns; the writer goroutine (writeLoop) owns writes to nc.
// Each slot is written by exactly one goroutine (a handler, or the reader
// for SASL requests) before it is finished (wire.Slot).
type conn struct {
	b *Broker
	// raw is the accepted socket: closing it or setting its read deadline
	// works from any goroutine. nc is what requests are read from and
	// responses written to: raw, or the TLS connection over it (set by
	// serve before the loops start).
	raw    net.Conn
	nc     net.Conn
	br     *bufio.Reader
	l      ListenerConfig
	host   string // the peer's IP address
	log    *slog.Logger
	queue  chan *wire.Slot // request order; capacity bounds requests in flight
	ctx    context.Context
	cancel context.CancelFunc
	// turns chains the handlers in request order (reader-owned).
	turns wire.Turns
	// auth is the connection's identity (reader-owned; sasl.go).
	auth connAuth
	// mute holds the reader after a throttled response (set by the writer).
	mute wire.Mute
}

func newConn(b *Broker, nc net.Conn, l ListenerConfig, parent context.Context) *conn {
	ctx, cancel := context.WithCancel(parent)
	c := &conn{
		b:      b,
		raw:    nc,
		nc:     nc,
		l:      l,
		host:   remoteHost(nc),
		log:    b.log.With("remote", nc.RemoteAddr().String(), "listener", l.Name),
		queue:  make(chan *wire.Slot, b.cfg.MaxInFlightRequests),
		ctx:    ctx,
		cancel: cancel,
	}
	c.auth = newConnAuth(c, l)
	return c
}

// serve runs the connection until it closes; it returns once both loops
// have ended and the socket is closed.
func (c *conn) serve() {
	if err := c.handshake(); err != nil {
		c.log.Info("closing connection: TLS handshake failed", "err", err)
		c.close()
		return
	}
	c.br = bufio.NewReaderSize(c.nc, 64<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	c.readLoop()
	<-done
}

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// handshake runs the TLS handshake of SSL and SASL_SSL listeners. On an
// SSL listener a verified client certificate makes the principal
// "User:" + its subject (Kafka's default principal builder).
func (c *conn) handshake() error {
	if !c.l.Security.UsesTLS() {
		return nil
	}
	tc := tls.Server(c.raw, c.l.TLS)
	ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	c.nc = tc
	certs := tc.ConnectionState().PeerCertificates
	if c.l.Security == SSL && len(certs) > 0 && c.l.TLS.ClientAuth >= tls.VerifyClientCertIfGiven {
		c.setPrincipal("User:"+certs[0].Subject.String(), "mTLS")
	}
	return nil
}

// readLoop reads, decodes and dispatches requests until the peer goes away,
// a request is invalid, or the broker stops reading (read deadline).
func (c *conn) readLoop() {
	defer close(c.queue)
	for {
		if c.auth.rawTokens && !c.auth.authenticated {
			if !c.serveRawToken() {
				return
			}
			continue
		}
		frame, reserved, err := c.readRequest()
		if err != nil {
			c.logReadError(err)
			return
		}
		c.mute.Wait(c.ctx)
		if !c.serveFrame(frame, reserved) {
			return
		}
	}
}

// readRequest reads one frame once the broker's queued-bytes budget has
// room for it; the caller releases reserved when the request is handled.
func (c *conn) readRequest() (frame []byte, reserved int64, err error) {
	head, err := c.br.Peek(4)
	if err != nil {
		return nil, 0, err
	}
	maxBytes := c.b.cfg.SocketRequestMaxBytes
	if !c.auth.authenticated {
		maxBytes = min(maxBytes, preAuthMaxRequestBytes)
	}
	// Out-of-range sizes reserve nothing: ReadFrame rejects them unread.
	if size := int32(binary.BigEndian.Uint32(head)); size >= wire.MinRequestHeaderBytes && size <= maxBytes {
		charge := int64(size) * decodeAmplification // see decodeWithinBudget
		if !c.b.queued.Acquire(c.ctx, charge) {
			return nil, 0, c.ctx.Err()
		}
		reserved = charge
	}
	frame, err = wire.ReadFrame(c.br, maxBytes)
	if err != nil {
		c.b.queued.Release(reserved)
		return nil, 0, err
	}
	return frame, reserved, nil
}

// serveFrame decodes one request and starts serving it; false closes the
// connection. It owns reserved until it hands it to the handler.
func (c *conn) serveFrame(frame []byte, reserved int64) bool {
	d, reserved, err := c.decodeWithinBudget(frame, reserved)
	if err != nil {
		c.b.queued.Release(reserved)
		c.log.Info("closing connection on bad request", "err", err)
		return false
	}
	if !c.auth.authenticated && !c.b.apis.preAuthAllowed(d.hdr.APIKey) {
		c.b.queued.Release(reserved)
		c.log.Info("closing connection: request before SASL authentication", "api_key", d.hdr.APIKey)
		return false
	}
	s := wire.NewSlot()
	select {
	case c.queue <- s:
	case <-c.ctx.Done():
		c.b.queued.Release(reserved)
		return false
	}
	if d.req != nil && (d.hdr.APIKey == saslHandshakeKey || d.hdr.APIKey == saslAuthenticateKey) {
		closeAfter := c.serveSASL(d, s)
		c.b.queued.Release(reserved)
		s.Finish()
		return !closeAfter
	}
	c.dispatch(d, s, reserved)
	return true
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.Canceled):
	case errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, wire.ErrFrameTooSmall):
		c.log.Warn("closing connection on bad frame", "err", err)
	default:
		c.log.Debug("connection read ended", "err", err)
	}
}

// dispatch starts the request's handler. Requests are chained: each
// handler starts only after the previous request of this connection
// released its turn, so their effects happen in the order they were sent
// (Kafka processes one request of a connection at a time). A turn is
// released when the handler returns, or earlier by a handler whose
// effects are done (releaseOrder). The reader keeps reading ahead into
// the queue, bounded by MaxInFlightRequests and the queued-bytes budget.
// The handler releases reserved queued bytes when it ends.
func (c *conn) dispatch(d decodedRequest, s *wire.Slot, reserved int64) {
	if d.req == nil { // unsupported ApiVersions version: answer v0
		s.Frame = wire.AppendResponseFrame(nil, d.hdr.CorrelationID, c.b.apis.apiVersionsFallback())
		c.b.queued.Release(reserved)
		s.Finish()
		return
	}
	rc := &requestContext{
		conn:          c.nc,
		clientID:      d.hdr.ClientID,
		correlationID: d.hdr.CorrelationID,
		apiKey:        d.hdr.APIKey,
		version:       d.hdr.Version,
		principal:     c.auth.principal,
		host:          c.host,
		listener:      c.l.Name,
	}
	prev, release := c.turns.Next()
	rc.orderRelease = release
	c.b.inflight.Add(1)
	go c.run(d, s, rc, prev, reserved)
}

// run executes one handler and fills its slot. A panic is recovered and
// closes this connection only.
func (c *conn) run(d decodedRequest, s *wire.Slot, rc *requestContext, prev <-chan struct{}, reserved int64) {
	defer c.b.inflight.Done()
	defer c.b.queued.Release(reserved)
	defer c.requestDone(d.hdr.APIKey, time.Now(), s)
	defer s.Finish()
	defer rc.releaseOrder()
	// After the response is encoded into its frame (a copy) or abandoned,
	// and before the slot is marked done: the reads' buffers go back.
	defer func() { rc.reads.release() }()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panic", "api_key", d.hdr.APIKey, "version", d.hdr.Version,
				"panic", r, "stack", string(debug.Stack()))
			s.Frame, s.CloseAfter = nil, true
		}
	}()
	if prev != nil {
		select {
		case <-prev:
		case <-c.ctx.Done():
			s.CloseAfter = true
			return
		}
	}
	resp, err := d.entry.handle(c.ctx, rc, d.req)
	if err != nil {
		c.log.Info("closing connection on handler error", "api_key", d.hdr.APIKey, "err", err)
		s.CloseAfter = true
		return
	}
	if resp == nil {
		return
	}
	resp.SetVersion(d.req.GetVersion())
	applyThrottle(rc, resp)
	c.b.rewriteEndpoints(rc.listener, resp)
	s.ThrottleMs = rc.throttleMs
	s.Frame = wire.AppendResponseFrame(wire.GetFrameBuffer(wire.ResponseSizeHint(resp)), d.hdr.CorrelationID, resp)
}

// releaseOrder lets the next request of the connection start. The
// connection calls it when the handler returns; a handler may call it
// earlier, once every effect of its request has happened and only a wait
// remains (Produce and WriteTxnMarkers after their appends, waiting for
// the HW), so that pipelined requests overlap their waits. Nothing the
// next request does can then be observed before this one's effects. Safe
// to call more than once.
func (rc *requestContext) releaseOrder() {
	if rc.orderRelease != nil {
		rc.orderRelease()
	}
}

// writeLoop writes responses in request order, then closes the connection.
func (c *conn) writeLoop() {
	defer c.close()
	if err := wire.WriteInOrder(c.ctx, c.queue, c.nc, &c.mute); err != nil {
		c.log.Debug("connection write failed", "err", err)
	}
}

// close ends the connection: handler contexts are cancelled and a reader
// blocked in Read or on a full queue returns.
func (c *conn) close() {
	c.cancel()
	_ = c.raw.Close()
}

// stopReading makes the reader return at its next read, so the writer can
// drain the requests already in flight (graceful shutdown).
func (c *conn) stopReading() {
	_ = c.raw.SetReadDeadline(aLongTimeAgo)
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

// decodeAmplification bounds how much memory decoding a frame may take,
// per frame byte: a request of many tiny array elements (a Produce naming
// a million empty topics) decodes to tens of times its size. readRequest
// charges the queued budget that much per frame, so concurrent decodes
// stay within queued.max.request.bytes (one frame larger than the whole
// budget still passes alone).
const decodeAmplification = 64

// maxProducePartitions bounds the partitions one Produce may name (clients
// send one entry per partition they have records for).
const maxProducePartitions = 100_000

// decodeWithinBudget decodes frame under readRequest's amplified charge. A
// Produce (whose records stay in the frame's bytes) then goes back to a
// charge of its frame size; other requests, small in practice, keep the
// amplified charge until handled. Returns what the caller holds now.
func (c *conn) decodeWithinBudget(frame []byte, reserved int64) (decodedRequest, int64, error) {
	d, err := c.b.apis.decode(frame)
	if err != nil {
		return d, reserved, err
	}
	if req, ok := d.req.(*kmsg.ProduceRequest); ok {
		n := len(req.Topics)
		for i := range req.Topics {
			n += len(req.Topics[i].Partitions)
		}
		if n > maxProducePartitions {
			return d, reserved, fmt.Errorf("%w: produce naming %d topics and partitions (at most %d)",
				wire.ErrMalformedBody, n, maxProducePartitions)
		}
		if keep := int64(len(frame)) + 4; reserved > keep {
			c.b.queued.Release(reserved - keep)
			reserved = keep
		}
	}
	return d, reserved, nil
}
