package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
	"github.com/strata-log/strata/metadata"
)

// newWireBroker serves the dispatch table (which edit may change) on
// 127.0.0.1 without metadata or logs: enough for the connection machinery.
func newWireBroker(t *testing.T, edit func(apiTable)) *Broker {
	t.Helper()
	return newWireBrokerConfig(t, Config{}, nil, edit)
}

// newWireBrokerConfig is newWireBroker with cfg's settings (its first
// listener is served; the node, data dir and sizes are the test's).
// store (may be nil) is where SASL credentials are looked up.
func newWireBrokerConfig(t *testing.T, cfg Config, store *metadata.Store, edit func(apiTable)) *Broker {
	t.Helper()
	cfg.NodeID, cfg.DataDir, cfg.SocketRequestMaxBytes = 1, t.TempDir(), 1<<20
	if cfg.MaxInFlightRequests == 0 {
		cfg.MaxInFlightRequests = 8
	}
	cfg = cfg.withDefaults()
	if cfg.Logger == slog.Default() {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b := &Broker{cfg: cfg, log: cfg.Logger, store: store}
	b.apis = newAPITable(b)
	if edit != nil {
		edit(b.apis)
	}
	b.connLimits = wire.NewConnLimiter(wire.ConnLimits{MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnectionsPerIP})
	b.queued = wire.NewByteBudget(cfg.QueuedMaxRequestBytes)
	conns, err := newConnServer(b)
	if err != nil {
		t.Fatal(err)
	}
	b.conns = conns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.ln = ln
	b.listeners = []*listener{{Config: cfg.listeners()[0], Listener: ln, Endpoint: ln.Addr().String()}}
	b.loops.Add(1)
	go b.acceptLoop(b.listeners[0])
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.conns.Drain(ctx)
		b.loops.Wait()
	})
	return b
}

type wireClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialWire(t *testing.T, b *Broker) *wireClient {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &wireClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *wireClient) send(req kmsg.Request, correlationID int32) {
	c.t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, correlationID)
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response frame and returns its correlation id and body
// (after the header, which is flexible unless ApiVersions).
func (c *wireClient) recv(flexibleHeader bool) (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return 0, nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, frame); err != nil {
		return 0, nil, err
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if flexibleHeader {
		body = body[1:]
	}
	return corr, body, nil
}

func (c *wireClient) expectClosed() {
	c.t.Helper()
	_, _, err := c.recv(false)
	if err == nil {
		c.t.Fatal("expected the connection to be closed, got a response")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
}

func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	return req
}

func TestApiVersionsListsEveryKey(t *testing.T) {
	b := newWireBroker(t, nil)
	c := dialWire(t, b)
	c.send(apiVersionsReq(4), 7)
	corr, body, err := c.recv(false) // ApiVersions response header is never flexible
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 4
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if corr != 7 || resp.ErrorCode != 0 {
		t.Fatalf("corr %d error %d", corr, resp.ErrorCode)
	}
	want := map[int16][2]int16{0: {3, 11}, 3: {0, 13}, 18: {0, 4}, 19: {0, 7}, 60: {0, 1}, 10: {0, 6}, 11: {0, 9}, 47: {0, 0}}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for key, v := range want {
		if key == 0 {
			v = [2]int16{b.apis[0].spec.minVersion, b.apis[0].spec.maxVersion}
		}
		if got[key] != v {
			t.Errorf("key %d: got %v want %v", key, got[key], v)
		}
	}
	if n := len(b.apis); len(got) != n || n < len(apiSpecs) {
		t.Errorf("%d keys listed, want %d", len(got), n)
	}
}

func TestApiVersionsUnsupportedVersionFallsBackToV0(t *testing.T) {
	b := newWireBroker(t, nil)
	c := dialWire(t, b)
	// A future version with a body this broker cannot parse.
	frame := []byte{0, 0, 0, 14, 0, 18, 0, 99, 0, 0, 0, 42, 0, 0, 0xff, 0xfe, 0xfd, 0xfc}
	if _, err := c.nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	corr, body, err := c.recv(false)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if corr != 42 || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("corr %d error %d, want 42 and UNSUPPORTED_VERSION", corr, resp.ErrorCode)
	}
	found := false
	for _, k := range resp.ApiKeys {
		found = found || (k.ApiKey == 18 && k.MaxVersion == 4)
	}
	if !found {
		t.Fatalf("fallback does not list ApiVersions 0-4: %+v", resp.ApiKeys)
	}
	// The connection stays usable.
	c.send(apiVersionsReq(3), 43)
	if corr, _, err := c.recv(false); err != nil || corr != 43 {
		t.Fatalf("after fallback: corr %d err %v", corr, err)
	}
}

func TestBadRequestsCloseTheConnection(t *testing.T) {
	b := newWireBroker(t, nil)
	cases := map[string][]byte{
		"unknown api key":          {0, 0, 0, 10, 0x03, 0xe8, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"unsupported version":      {0, 0, 0, 10, 0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff},
		"frame over the limit":     {0x7f, 0xff, 0xff, 0xff, 0, 18},
		"frame under a header":     {0, 0, 0, 3, 0, 18, 0},
		"negative frame size":      {0xff, 0xff, 0xff, 0xf0},
		"client id past the end":   {0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0x10, 0},
		"truncated metadata body":  {0, 0, 0, 12, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0},
		"metadata array past end":  {0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0, 0, 0},
		"flexible header bad tags": {0, 0, 0, 11, 0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0x05},
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialWire(t, b)
			if _, err := c.nc.Write(frame); err != nil {
				t.Fatal(err)
			}
			c.expectClosed()
		})
	}
}

// TestResponsesInRequestOrder: handlers finish in reverse order, responses
// still come back in request order; a request without a response (acks=0
// Produce) keeps its place without output.
func TestResponsesInRequestOrder(t *testing.T) {
	b := newWireBroker(t, func(tab apiTable) {
		e := tab[18]
		e.handle = func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
			time.Sleep(time.Duration(10-rc.correlationID) * 20 * time.Millisecond)
			return req.ResponseKind(), nil
		}
		tab[18] = e
		p := tab[0]
		p.handle = func(context.Context, *requestContext, kmsg.Request) (kmsg.Response, error) { return nil, nil }
		tab[0] = p
	})
	c := dialWire(t, b)
	for corr := int32(1); corr <= 5; corr++ {
		c.send(apiVersionsReq(0), corr)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks = 9, 0
	c.send(produce, 6)
	c.send(apiVersionsReq(0), 7)
	for _, want := range []int32{1, 2, 3, 4, 5, 7} {
		corr, _, err := c.recv(false)
		if err != nil || corr != want {
			t.Fatalf("got correlation id %d (err %v), want %d", corr, err, want)
		}
	}
}

// TestProduceRequestsRunOneAtATime: pipelined Produce requests of one
// connection never overlap, so appends keep the order they were sent in.
func TestProduceRequestsRunOneAtATime(t *testing.T) {
	var running, overlaps, order atomic.Int32
	b := newWireBroker(t, func(tab apiTable) {
		p := tab[0]
		p.handle = func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			if got := order.Add(1); got != rc.correlationID {
				t.Errorf("produce %d ran as number %d", rc.correlationID, got)
			}
			time.Sleep(10 * time.Millisecond)
			running.Add(-1)
			return req.ResponseKind(), nil
		}
		tab[0] = p
	})
	c := dialWire(t, b)
	for corr := int32(1); corr <= 5; corr++ {
		produce := kmsg.NewPtrProduceRequest()
		produce.Version, produce.Acks = 9, -1
		c.send(produce, corr)
	}
	for want := int32(1); want <= 5; want++ {
		if corr, _, err := c.recv(true); err != nil || corr != want {
			t.Fatalf("got %d (err %v), want %d", corr, err, want)
		}
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d produce handlers overlapped", overlaps.Load())
	}
}

func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	b := newWireBroker(t, func(tab apiTable) {
		e := tab[3]
		e.handle = func(context.Context, *requestContext, kmsg.Request) (kmsg.Response, error) { panic("boom") }
		tab[3] = e
	})
	c := dialWire(t, b)
	c.send(apiVersionsReq(0), 1)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.send(md, 2)
	if corr, _, err := c.recv(false); err != nil || corr != 1 {
		t.Fatalf("response before the panic: corr %d err %v", corr, err)
	}
	c.expectClosed()
	other := dialWire(t, b)
	other.send(apiVersionsReq(0), 3)
	if corr, _, err := other.recv(false); err != nil || corr != 3 {
		t.Fatalf("broker no longer serves: corr %d err %v", corr, err)
	}
}

// TestDrainFinishesInFlightRequests: a request being handled when shutdown
// starts still gets its response.
func TestDrainFinishesInFlightRequests(t *testing.T) {
	started := make(chan struct{})
	b := newWireBroker(t, func(tab apiTable) {
		e := tab[18]
		e.handle = func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
			close(started)
			time.Sleep(100 * time.Millisecond)
			return req.ResponseKind(), nil
		}
		tab[18] = e
	})
	c := dialWire(t, b)
	c.send(apiVersionsReq(0), 9)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.ln.Close()
	if err := b.conns.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if corr, _, err := c.recv(false); err != nil || corr != 9 {
		t.Fatalf("in-flight request lost: corr %d err %v", corr, err)
	}
	c.expectClosed()
}
