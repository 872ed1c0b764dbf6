package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/bufpool"
)

// The Server and Conn driven through a Session twin over loopback TCP: no
// broker, no API table.

// twinSession answers Metadata (key 3) through handle, refuses Produce
// (key 0) before auth, and serves ApiVersions inline. After a request of
// key 17 (SaslHandshake) it expects raw tokens until one equals "done".
type twinSession struct {
	handle    func(hdr RequestHeader) Handler
	authed    bool
	rawTokens bool
}

func (s *twinSession) MaxRequestBytes() int32 { return 1 << 20 }

func (s *twinSession) RawTokenLimit() uint32 {
	if s.rawTokens {
		return 16
	}
	return 0
}

func (s *twinSession) RawToken(token []byte) ([]byte, bool) {
	if string(token) == "bad" {
		return nil, false
	}
	s.rawTokens = string(token) != "done"
	return append([]byte("re: "), token...), true
}

func (s *twinSession) Route(hdr RequestHeader, req kmsg.Request) Route {
	switch hdr.APIKey {
	case 0:
		if !s.authed {
			return Route{Refuse: true}
		}
	case APIVersionsKey:
		return Route{Inline: func() ([]byte, bool) {
			return AppendResponseFrame(nil, hdr.CorrelationID, kmsg.NewPtrApiVersionsResponse()), false
		}}
	case 17:
		s.rawTokens = true
		return Route{Inline: func() ([]byte, bool) {
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.SetVersion(req.GetVersion())
			return AppendResponseFrame(nil, hdr.CorrelationID, resp), false
		}}
	}
	return Route{Handle: s.handle(hdr)}
}

// answer is a Handler that answers an empty Metadata v0 response.
func answer(corr int32) Handler {
	return func(context.Context, func()) ([]byte, int32, error) {
		return AppendResponseFrame(nil, corr, kmsg.NewPtrMetadataResponse()), 0, nil
	}
}

func allKeys(key int16) (int16, int16, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, false
	}
	return 0, req.MaxVersion(), true
}

type twinServer struct {
	srv    *Server
	budget *ByteBudget
	addr   string
}

func startTwinServer(t *testing.T, newSession func() Session) *twinServer {
	t.Helper()
	budget := NewByteBudget(1 << 20)
	srv, err := NewServer(ServerConfig{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxInFlightRequests: 8, Versions: allKeys,
		Budget: budget, Limiter: NewConnLimiter(ConnLimits{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		srv.Accept(ln, &Listener{Name: "TWIN", NewSession: func(context.Context, ConnInfo) Session { return newSession() }})
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepting
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Drain(ctx)
		srv.Close(time.Second)
	})
	return &twinServer{srv: srv, budget: budget, addr: ln.Addr().String()}
}

type twinClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func (ts *twinServer) dial(t *testing.T) *twinClient {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &twinClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *twinClient) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	if _, err := c.nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *twinClient) metadata(corr int32) {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 0
	c.send(req, corr)
}

// recv reads one size-prefixed frame: its first 4 bytes (the correlation
// id of a response) and the rest.
func (c *twinClient) recv() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return 0, nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, frame); err != nil {
		return 0, nil, err
	}
	if len(frame) < 4 {
		return 0, frame, nil
	}
	return int32(binary.BigEndian.Uint32(frame)), frame[4:], nil
}

func (c *twinClient) expect(corrs ...int32) {
	c.t.Helper()
	for _, want := range corrs {
		if got, _, err := c.recv(); err != nil || got != want {
			c.t.Fatalf("got correlation id %d (err %v), want %d", got, err, want)
		}
	}
}

func (c *twinClient) expectClosed() {
	c.t.Helper()
	if _, _, err := c.recv(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.t.Fatalf("connection not closed: %v", err)
	}
}

// TestConnAnswersInRequestOrderOneHandlerAtATime: handlers run one after
// the other in request order, yet answers written late by the writer keep
// that order; a nil frame keeps its place without output.
func TestConnAnswersInRequestOrderOneHandlerAtATime(t *testing.T) {
	var running, overlaps, order atomic.Int32
	ts := startTwinServer(t, func() Session {
		return &twinSession{handle: func(hdr RequestHeader) Handler {
			return func(context.Context, func()) ([]byte, int32, error) {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				defer running.Add(-1)
				if got := order.Add(1); got != hdr.CorrelationID {
					t.Errorf("request %d ran as number %d", hdr.CorrelationID, got)
				}
				time.Sleep(5 * time.Millisecond)
				if hdr.CorrelationID == 3 {
					return nil, 0, nil
				}
				return answer(hdr.CorrelationID)(nil, nil)
			}
		}}
	})
	c := ts.dial(t)
	for corr := int32(1); corr <= 5; corr++ {
		c.metadata(corr)
	}
	c.expect(1, 2, 4, 5)
	if overlaps.Load() != 0 {
		t.Fatalf("%d handlers overlapped", overlaps.Load())
	}
}

// TestConnReleaseLetsTheNextRequestStart: a handler that releases its turn
// early lets the next one run while it still waits; answers stay in order.
func TestConnReleaseLetsTheNextRequestStart(t *testing.T) {
	secondRan := make(chan struct{})
	ts := startTwinServer(t, func() Session {
		return &twinSession{handle: func(hdr RequestHeader) Handler {
			if hdr.CorrelationID == 2 {
				return func(context.Context, func()) ([]byte, int32, error) {
					close(secondRan)
					return answer(2)(nil, nil)
				}
			}
			return func(ctx context.Context, release func()) ([]byte, int32, error) {
				release()
				select {
				case <-secondRan:
				case <-time.After(5 * time.Second):
					t.Error("the next request did not start after release")
				}
				return answer(1)(ctx, nil)
			}
		}}
	})
	c := ts.dial(t)
	c.metadata(1)
	c.metadata(2)
	c.expect(1, 2)
}

// TestConnCloses: a handler error or panic closes its connection after
// the answers before it, and only that connection; so do a refused
// request and a bad frame.
func TestConnCloses(t *testing.T) {
	ts := startTwinServer(t, func() Session {
		return &twinSession{handle: func(hdr RequestHeader) Handler {
			switch hdr.CorrelationID {
			case 2:
				return func(context.Context, func()) ([]byte, int32, error) { return nil, 0, errors.New("boom") }
			case 3:
				return func(context.Context, func()) ([]byte, int32, error) { panic("boom") }
			}
			return answer(hdr.CorrelationID)
		}}
	})
	for _, failing := range []int32{2, 3} {
		c := ts.dial(t)
		c.metadata(1)
		c.metadata(failing)
		c.expect(1)
		c.expectClosed()
	}
	refused := ts.dial(t)
	refused.send(kmsg.NewPtrProduceRequest(), 1)
	refused.expectClosed()
	bad := ts.dial(t)
	if _, err := bad.nc.Write([]byte{0, 0, 0, 3, 0, 18, 0}); err != nil {
		t.Fatal(err)
	}
	bad.expectClosed()
	other := ts.dial(t)
	other.metadata(7)
	other.expect(7)
	// A request is counted once its answer is out: wait for the last.
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := ts.srv.RequestMetrics()
		if len(m) == 1 && m[0].APIKey == 3 && m[0].Count == 5 && m[0].Errors == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("request metrics %+v, want 5 Metadata requests, 2 errors", m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConnInlineAndRawTokens: inline answers keep their place, and raw
// tokens are read and answered unframed until the session is done.
func TestConnInlineAndRawTokens(t *testing.T) {
	ts := startTwinServer(t, func() Session {
		return &twinSession{handle: func(hdr RequestHeader) Handler { return answer(hdr.CorrelationID) }}
	})
	c := ts.dial(t)
	c.metadata(1)
	c.send(kmsg.NewPtrApiVersionsRequest(), 2)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 0
	c.send(hs, 3)
	c.expect(1, 2, 3)
	for _, token := range []string{"step", "done"} {
		if _, err := c.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)); err != nil {
			t.Fatal(err)
		}
		if _, reply, err := c.recv(); err != nil || string(reply) != token { // recv takes "re: " for a correlation id
			t.Fatalf("raw reply %q (err %v) to %q", reply, err, token)
		}
	}
	c.metadata(4)
	c.expect(4)

	tooLong := ts.dial(t)
	tooLong.send(hs, 1)
	tooLong.expect(1)
	if _, err := tooLong.nc.Write(binary.BigEndian.AppendUint32(nil, 17)); err != nil {
		t.Fatal(err)
	}
	tooLong.expectClosed()
}

// TestServerDrain: a request in flight when the drain starts is answered,
// then the connection closes; the queued bytes all come back.
func TestServerDrain(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	ts := startTwinServer(t, func() Session {
		return &twinSession{handle: func(hdr RequestHeader) Handler {
			return func(ctx context.Context, _ func()) ([]byte, int32, error) {
				once.Do(func() { close(started) })
				time.Sleep(100 * time.Millisecond)
				return answer(hdr.CorrelationID)(ctx, nil)
			}
		}}
	})
	c := ts.dial(t)
	c.metadata(9)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	c.expect(9)
	c.expectClosed()
	ts.srv.Close(5 * time.Second) // the handler goroutine's last defers
	if n := ts.budget.InUse(); n != 0 {
		t.Fatalf("%d queued bytes held after the drain", n)
	}
}

// TestServerDrainDeadlineCancelsHandlers: past the drain's deadline the
// handlers' context ends and the connections close.
func TestServerDrainDeadlineCancelsHandlers(t *testing.T) {
	started := make(chan struct{})
	ts := startTwinServer(t, func() Session {
		return &twinSession{handle: func(hdr RequestHeader) Handler {
			return func(ctx context.Context, _ func()) ([]byte, int32, error) {
				close(started)
				<-ctx.Done()
				return nil, 0, ctx.Err()
			}
		}}
	})
	c := ts.dial(t)
	c.metadata(1)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ts.srv.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain past its deadline: %v", err)
	}
	c.expectClosed()
}

func TestServerConfigValidate(t *testing.T) {
	valid := ServerConfig{Log: slog.Default(), MaxInFlightRequests: 1, Versions: allKeys,
		Budget: NewByteBudget(0), Limiter: NewConnLimiter(ConnLimits{})}
	if err := valid.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*ServerConfig){
		"log":       func(c *ServerConfig) { c.Log = nil },
		"in flight": func(c *ServerConfig) { c.MaxInFlightRequests = 0 },
		"versions":  func(c *ServerConfig) { c.Versions = nil },
		"budget":    func(c *ServerConfig) { c.Budget = nil },
		"limiter":   func(c *ServerConfig) { c.Limiter = nil },
	} {
		c := valid
		edit(&c)
		if _, err := NewServer(c); !errors.Is(err, ErrInvalidServerConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// produceSession routes every Produce to check, which sees the decoded
// request (twinSession's handlers see only the header).
type produceSession struct {
	twinSession
	check func(hdr RequestHeader, req *kmsg.ProduceRequest, release func()) Handler
}

func (s *produceSession) Route(hdr RequestHeader, req kmsg.Request) Route {
	if hdr.APIKey == produceKey {
		return Route{Handle: s.check(hdr, req.(*kmsg.ProduceRequest), nil)}
	}
	return s.twinSession.Route(hdr, req)
}

// TestConnPooledProduceFramesOutliveTheirHandlers: large Produce frames are
// read into pooled buffers; while pipelined handlers overlap, each still
// sees its own records intact until it returns (a frame put back early is
// refilled by the next request's read).
func TestConnPooledProduceFramesOutliveTheirHandlers(t *testing.T) {
	bad := make(chan string, 64)
	ts := startTwinServer(t, func() Session {
		return &produceSession{check: func(hdr RequestHeader, req *kmsg.ProduceRequest, _ func()) Handler {
			return func(_ context.Context, release func()) ([]byte, int32, error) {
				release() // let the next request start: handlers overlap
				time.Sleep(2 * time.Millisecond)
				records := req.Topics[0].Partitions[0].Records
				want := byte(hdr.CorrelationID)
				if len(records) < bufpool.MinPooled || bytes.Count(records, []byte{want}) != len(records) {
					bad <- fmt.Sprintf("request %d: records changed under its handler", hdr.CorrelationID)
				}
				return AppendResponseFrame(nil, hdr.CorrelationID, kmsg.NewPtrMetadataResponse()), 0, nil
			}
		}}
	})
	c := ts.dial(t)
	const n = 24
	for corr := int32(1); corr <= n; corr++ {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 7, -1
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = "t"
		part := kmsg.NewProduceRequestTopicPartition()
		part.Records = bytes.Repeat([]byte{byte(corr)}, bufpool.MinPooled+1000)
		topic.Partitions = append(topic.Partitions, part)
		req.Topics = append(req.Topics, topic)
		c.send(req, corr)
	}
	for corr := int32(1); corr <= n; corr++ {
		c.expect(corr)
	}
	close(bad)
	for msg := range bad {
		t.Error(msg)
	}
}
