package wire

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

	"github.com/strata-log/strata/bufpool"
)

// Session is the broker's side of one connection: its identity and how
// its requests are served. The Conn calls its methods from the
// connection's reader goroutine only, one at a time and in request order,
// so a Session's state needs no lock; only the Handlers that Route returns
// run on other goroutines.
type Session interface {
	// MaxRequestBytes bounds the size of the next request frame (smaller
	// before authentication, for instance).
	MaxRequestBytes() int32
	// RawTokenLimit is above 0 while the session expects raw SASL tokens
	// (a 4-byte size, then the token, outside Kafka framing) instead of
	// requests: the largest token it takes.
	RawTokenLimit() uint32
	// RawToken answers one raw token with the raw reply to send; false
	// closes the connection.
	RawToken(token []byte) (reply []byte, ok bool)
	// Route decides how a decoded request is served. req is nil for an
	// ApiVersions request at a version that is not served.
	Route(hdr RequestHeader, req kmsg.Request) Route
}

// Route is how one request is served; exactly one of its fields is set.
type Route struct {
	// Refuse closes the connection without an answer (a request before
	// authentication); the Session logs why.
	Refuse bool
	// Inline answers the request on the reader before the next request is
	// read (SASL, whose answer changes how the next input is read, and the
	// ApiVersions fallback): the response frame, and whether the
	// connection closes after it.
	Inline func() (frame []byte, closeAfter bool)
	// Handle serves the request on a goroutine of its own.
	Handle Handler
}

// Handler serves one request once the requests sent before it on its
// connection released their turn. It may call release once every effect
// of its request has happened and only a wait remains, so that the next
// request starts (the Conn releases the turn when Handler returns; release
// is safe to call more than once). frame is the encoded response (nil: no
// response); throttleMs mutes the reader after it is written. An error
// closes the connection: protocol errors go inside the response.
type Handler func(ctx context.Context, release func()) (frame []byte, throttleMs int32, err error)

// ConnInfo describes an accepted connection to its listener's NewSession.
type ConnInfo struct {
	// Conn reads requests and writes responses: the socket, or the TLS
	// connection over it.
	Conn net.Conn
	// Host is the peer's IP address (ACL host, per-IP limits).
	Host string
	// Log carries the connection's remote address and listener.
	Log *slog.Logger
	// TLS is the completed handshake's state; nil on a plaintext listener.
	TLS *tls.ConnectionState
}

// aLongTimeAgo is a read deadline in the past: it unblocks a pending Read.
var aLongTimeAgo = time.Unix(1, 0)

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// readBufferBytes is the size of a connection's read buffer.
const readBufferBytes = 64 << 10

// Conn is one client connection. The reader goroutine (readLoop) owns br,
// sess and turns; resp owns writes to nc (whichever goroutine finishes the
// oldest unanswered request writes, see Responses). Each slot is filled by
// exactly one goroutine (a handler, or the reader for inline answers)
// before it is finished (Slot).
type Conn struct {
	srv *Server
	// raw is the accepted socket: closing it or setting its read deadline
	// works from any goroutine. nc is what requests are read from and
	// responses written to: raw, or the TLS connection over it (set by
	// serve before the loops start).
	raw    net.Conn
	nc     net.Conn
	br     *bufio.Reader
	lis    *Listener
	host   string // the peer's IP address
	log    *slog.Logger
	sess   Session
	resp   *Responses // answers in request order; bounds the requests in flight
	ctx    context.Context
	cancel context.CancelFunc
	// turns chains the handlers in request order (reader-owned).
	turns Turns
	// mute holds the reader after a throttled response (set by the writer).
	mute Mute
}

func newConn(srv *Server, nc net.Conn, lis *Listener, host string) *Conn {
	ctx, cancel := context.WithCancel(srv.handlerCtx)
	return &Conn{
		srv:    srv,
		raw:    nc,
		nc:     nc,
		lis:    lis,
		host:   host,
		log:    srv.cfg.Log.With("remote", nc.RemoteAddr().String(), "listener", lis.Name),
		ctx:    ctx,
		cancel: cancel,
	}
}

// serve runs the connection until it closes; it returns once both loops
// have ended and the socket is closed.
func (c *Conn) serve() {
	info, err := c.handshake()
	if err != nil {
		c.log.Info("closing connection: TLS handshake failed", "err", err)
		c.close()
		return
	}
	c.sess = c.lis.NewSession(c.ctx, info)
	c.br = bufio.NewReaderSize(c.nc, readBufferBytes)
	c.resp = NewResponses(c.nc, &c.mute, c.srv.cfg.MaxInFlightRequests, c.close)
	// Handlers cancelled (a forced drain): stop writing, which closes the
	// connection and so ends a pending Read.
	stopWatch := context.AfterFunc(c.ctx, c.resp.Stop)
	defer stopWatch()
	c.readLoop()
	c.resp.ReaderDone()
	<-c.resp.Done()
	if err := c.resp.Err(); err != nil {
		c.log.Debug("connection write failed", "err", err)
	}
	c.close()
}

// handshake runs the TLS handshake of a listener with a TLS configuration.
func (c *Conn) handshake() (ConnInfo, error) {
	info := ConnInfo{Conn: c.raw, Host: c.host, Log: c.log}
	if c.lis.TLS == nil {
		return info, nil
	}
	tc := tls.Server(c.raw, c.lis.TLS)
	ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return info, err
	}
	c.nc = tc
	state := tc.ConnectionState()
	info.Conn, info.TLS = tc, &state
	return info, nil
}

// readLoop reads, decodes and dispatches requests until the peer goes away,
// a request is invalid, or the server stops reading (read deadline).
func (c *Conn) readLoop() {
	for {
		if limit := c.sess.RawTokenLimit(); limit > 0 {
			if !c.serveRawToken(limit) {
				return
			}
			continue
		}
		in, err := c.readRequest()
		if err != nil {
			c.logReadError(err)
			return
		}
		c.mute.Wait(c.ctx)
		if !c.serveFrame(in) {
			return
		}
	}
}

// inbound is one request frame read, with what it holds: reserved bytes of
// the queued budget, and whether the frame is a pooled buffer (a large
// Produce) to put back once the request is handled.
type inbound struct {
	frame    []byte
	reserved int64
	pooled   bool
}

// done releases what in holds. Nothing may read the frame after.
func (c *Conn) done(in inbound) {
	c.srv.cfg.Budget.Release(in.reserved)
	if in.pooled {
		bufpool.Put(in.frame)
	}
}

// produceKey is Produce's API key.
const produceKey = 0

// readRequest reads one frame once the queued-bytes budget has room for
// it; the caller calls done when the request is handled.
//
// A Produce of at least bufpool.MinPooled bytes is read into a pooled
// buffer: its records stay in the frame until they are appended, and
// nothing keeps them after its handler returns (a Produce's only []byte
// fields are its batches; kmsg copies strings). Fresh frames of that size
// were zeroed and collected for every request: on 100-byte records over 8
// partitions, a sixth of the broker's CPU.
func (c *Conn) readRequest() (inbound, error) {
	head, err := c.br.Peek(4)
	if err != nil {
		return inbound{}, err
	}
	maxBytes := c.sess.MaxRequestBytes()
	budget := c.srv.cfg.Budget
	size := int32(binary.BigEndian.Uint32(head))
	if size < MinRequestHeaderBytes || size > maxBytes {
		// Out-of-range sizes reserve nothing: ReadFrame rejects them unread.
		_, err := ReadFrame(c.br, maxBytes)
		return inbound{}, err
	}
	in := inbound{reserved: int64(size) * decodeAmplification} // see decodeWithinBudget
	if !budget.Acquire(c.ctx, in.reserved) {
		return inbound{}, c.ctx.Err()
	}
	in.pooled = size >= bufpool.MinPooled && c.peekAPIKey() == produceKey
	var frame []byte
	if in.pooled {
		frame = bufpool.Get(int(size))[:size]
	} else {
		frame = make([]byte, size)
	}
	if _, err := c.br.Discard(4); err != nil {
		c.done(in)
		return inbound{}, err
	}
	if in.frame, err = readBody(c.br, frame); err != nil {
		in.frame = frame
		c.done(in)
		return inbound{}, err
	}
	return in, nil
}

// peekAPIKey is the API key of the frame whose size was just peeked, or
// -1 if it cannot be read.
func (c *Conn) peekAPIKey() int16 {
	head, err := c.br.Peek(6)
	if err != nil {
		return -1
	}
	return int16(binary.BigEndian.Uint16(head[4:]))
}

// serveFrame decodes one request and starts serving it; false closes the
// connection. It owns in until it hands it to the handler.
func (c *Conn) serveFrame(in inbound) bool {
	hdr, req, reserved, err := c.decodeWithinBudget(in.frame, in.reserved)
	in.reserved = reserved
	if err != nil {
		c.done(in)
		c.log.Info("closing connection on bad request", "err", err)
		return false
	}
	route := c.sess.Route(hdr, req)
	if route.Refuse {
		c.done(in)
		return false
	}
	s := c.resp.NewSlot(c.ctx)
	if s == nil {
		c.done(in)
		return false
	}
	if route.Handle == nil {
		var closeAfter bool
		s.Frame, closeAfter = route.Inline()
		s.CloseAfter = closeAfter
		c.done(in)
		s.Finish()
		return !closeAfter
	}
	c.dispatch(hdr, route.Handle, s, in)
	return true
}

// serveRawToken reads one raw SASL token and queues the session's raw
// reply; false closes the connection (raw tokens have no way to say why:
// the client sees the close).
func (c *Conn) serveRawToken(limit uint32) bool {
	token, err := readRawToken(c.br, limit)
	if err != nil {
		c.logReadError(err)
		return false
	}
	reply, ok := c.sess.RawToken(token)
	if !ok {
		return false
	}
	s := c.resp.NewSlot(c.ctx)
	if s == nil {
		return false
	}
	s.Frame = append(binary.BigEndian.AppendUint32(nil, uint32(len(reply))), reply...)
	s.Finish()
	return true
}

// readRawToken reads a size-prefixed raw SASL token of at most limit bytes.
func readRawToken(r io.Reader, limit uint32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > limit {
		return nil, fmt.Errorf("%w: raw SASL token of %d bytes", ErrFrameTooLarge, n)
	}
	token := make([]byte, n)
	if _, err := io.ReadFull(r, token); err != nil {
		return nil, err
	}
	return token, nil
}

func (c *Conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.Canceled):
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameTooSmall):
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
// effects are done. The reader keeps reading ahead, bounded by
// MaxInFlightRequests (Responses.NewSlot) and the queued-bytes budget. The
// handler's goroutine releases reserved queued bytes when it ends.
func (c *Conn) dispatch(hdr RequestHeader, handle Handler, s *Slot, in inbound) {
	prev, release := c.turns.Next()
	c.srv.inflight.Add(1)
	go c.run(hdr, handle, s, prev, release, in)
}

// run executes one handler and fills its slot. A panic is recovered and
// closes this connection only.
func (c *Conn) run(hdr RequestHeader, handle Handler, s *Slot, prev <-chan struct{}, release func(), in inbound) {
	// Finish runs last: it may write answers to the socket (Responses), and
	// a slow client must not hold the request's budget meanwhile.
	defer s.Finish()
	defer c.srv.inflight.Done()
	defer c.done(in)
	defer c.requestDone(hdr.APIKey, time.Now(), s)
	defer release()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panic", "api_key", hdr.APIKey, "version", hdr.Version,
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
	frame, throttleMs, err := handle(c.ctx, release)
	if err != nil {
		c.log.Info("closing connection on handler error", "api_key", hdr.APIKey, "err", err)
		s.CloseAfter = true
		return
	}
	s.Frame, s.ThrottleMs = frame, throttleMs
}

// requestDone records a finished request (run defers it with the
// request's start time).
func (c *Conn) requestDone(apiKey int16, start time.Time, s *Slot) {
	c.srv.stats.Observe(apiKey, time.Since(start), s.CloseAfter)
}

// close ends the connection: handler contexts are cancelled and a reader
// blocked in Read or waiting for a slot returns.
func (c *Conn) close() {
	c.cancel()
	_ = c.raw.Close()
}

// stopReading makes the reader return at its next read, so the writer can
// drain the requests already in flight (graceful shutdown).
func (c *Conn) stopReading() {
	_ = c.raw.SetReadDeadline(aLongTimeAgo)
}

// RemoteHost is the IP address of the connection's peer (its host for
// ACLs and per-IP limits), or the whole remote address if it has no port.
func RemoteHost(nc net.Conn) string {
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
func (c *Conn) decodeWithinBudget(frame []byte, reserved int64) (RequestHeader, kmsg.Request, int64, error) {
	hdr, req, err := DecodeRequest(frame, c.srv.cfg.Versions)
	if err != nil {
		return hdr, req, reserved, err
	}
	if produce, ok := req.(*kmsg.ProduceRequest); ok {
		n := len(produce.Topics)
		for i := range produce.Topics {
			n += len(produce.Topics[i].Partitions)
		}
		if n > maxProducePartitions {
			return hdr, req, reserved, fmt.Errorf("%w: produce naming %d topics and partitions (at most %d)",
				ErrMalformedBody, n, maxProducePartitions)
		}
		if keep := int64(len(frame)) + 4; reserved > keep {
			c.srv.cfg.Budget.Release(reserved - keep)
			reserved = keep
		}
	}
	return hdr, req, reserved, nil
}
