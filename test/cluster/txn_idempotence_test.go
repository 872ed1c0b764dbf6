package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxFrame bounds a Kafka frame the response-dropping proxy buffers.
const maxFrame = 64 << 20

// dropProxy forwards Kafka connections to one broker and can lose Produce
// responses: the request reaches the broker and is processed, and when its
// response comes back the proxy either resets both connections (drop) or
// stops forwarding anything to the client until it gives up (hold). It
// pairs responses with requests by order, which Kafka guarantees per
// connection. Safe for concurrent use.
type dropProxy struct {
	target string
	ln     net.Listener
	every  atomic.Int64 // lose every n-th Produce response; 0: none
	hold   atomic.Bool  // hold instead of reset, for the next loss only

	produces, dropped, held atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *dropProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *dropProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

// serve forwards one connection: requests as they come, recording each
// one's API key; responses one frame at a time, losing some Produce ones.
func (p *dropProxy) serve(client net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, up)
	defer p.untrack(client, up)
	keys := make(chan int16, 1024)
	go func() {
		defer close(keys)
		for {
			frame, err := readFrame(client)
			if err != nil || len(frame) < 6 {
				up.Close()
				return
			}
			select {
			case keys <- int16(binary.BigEndian.Uint16(frame[4:])):
			default: // more in flight than a client ever has: give up
				up.Close()
				return
			}
			if _, err := up.Write(frame); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(up)
		if err != nil {
			return
		}
		key, ok := <-keys
		if !ok {
			return
		}
		if key == 0 && p.lose() {
			if p.hold.Swap(false) {
				p.held.Add(1)
				_, _ = io.Copy(io.Discard, up) // answer nothing more until the client closes
			} else {
				p.dropped.Add(1)
				if tcp, ok := client.(*net.TCPConn); ok {
					_ = tcp.SetLinger(0)
				}
			}
			return
		}
		if _, err := client.Write(frame); err != nil {
			return
		}
	}
}

// lose counts a Produce response and says whether to lose it.
func (p *dropProxy) lose() bool {
	n := p.produces.Add(1)
	every := p.every.Load()
	return every > 0 && n%every == 0
}

// readFrame reads one size-prefixed Kafka frame, size included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// dropProxies puts a dropProxy in front of every broker and returns a kgo
// option dialling brokers through them.
func dropProxies(t *testing.T, c *Cluster) ([]*dropProxy, kgo.Opt) {
	byAddr := map[string]*dropProxy{}
	var all []*dropProxy
	for _, b := range c.Brokers() {
		p := newDropProxy(t, b.Addr)
		byAddr[b.Addr] = p
		all = append(all, p)
	}
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		if p, ok := byAddr[host]; ok {
			host = p.addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	}
	return all, kgo.Dialer(dial)
}

func sumProxies(ps []*dropProxy, f func(*dropProxy) int64) int64 {
	var n int64
	for _, p := range ps {
		n += f(p)
	}
	return n
}

// TestTxnIdempotentProducerLostResponses: an
// idempotent acks=all producer reaches the brokers through proxies that
// lose one Produce response in four after the broker processed the request
// (resetting the connection, or now and then holding it silent until the
// client times out), and once the leader of partition 0 is killed in the
// middle. The producer retries every lost batch; the history checker must
// find no duplicate, no lost write, and every acknowledgement at the
// offset the record really has (a retried duplicate is answered with the
// original offset).
func TestTxnIdempotentProducerLostResponses(t *testing.T) {
	defer timed(t, "TestTxnIdempotentProducerLostResponses")()
	c := Start(t, Config{})
	const topic = "idem-lost-responses"
	replicatedTopic(t, c, topic, 3, nil)
	proxies, dialer := dropProxies(t, c)
	kp := startKeyedProducer(t, c, topic, 3, 9, 300, dialer,
		kgo.RequestTimeoutOverhead(2*time.Second), kgo.ProduceRequestTimeout(3*time.Second))
	kp.waitAcked(c, 100, progressTimeout)
	for _, p := range proxies {
		p.every.Store(4)
	}
	lost := func() int64 {
		return sumProxies(proxies, func(p *dropProxy) int64 { return p.dropped.Load() + p.held.Load() })
	}
	waitLost := func(n int64) {
		c.WaitFor(fmt.Sprintf("%d lost Produce responses", n), 2*progressTimeout, func() (bool, string) {
			return lost() >= n, fmt.Sprintf("%d lost, %d acked; errors: %s", lost(), kp.acked.Load(), kp.Errors())
		})
	}
	waitLost(20)
	for _, p := range proxies {
		p.hold.Store(true)
	}
	waitLost(40)

	before := mustPartition(t, c, topic, 0)
	c.Kill(before.Leader)
	waitNewLeader(t, c, topic, 0, before.Leader, before.LeaderEpoch)
	c.Restart(before.Leader)
	for p := int32(0); p < 3; p++ {
		waitISR(t, c, topic, p, []int32{1, 2, 3})
	}
	waitLost(lost() + 20)
	kp.waitAcked(c, 200, progressTimeout)
	for _, p := range proxies {
		p.every.Store(0)
	}
	kp.stop()
	t.Logf("proxies: %d Produce responses, %d reset, %d held",
		sumProxies(proxies, func(p *dropProxy) int64 { return p.produces.Load() }),
		sumProxies(proxies, func(p *dropProxy) int64 { return p.dropped.Load() }),
		sumProxies(proxies, func(p *dropProxy) int64 { return p.held.Load() }))
	read := readTopic(t, c, topic, 3, false, finalReadTimeout)
	rep := kp.checkHistory(t, read)
	if rep.Stats.Acked < 1000 {
		t.Errorf("only %d acknowledged records (errors: %s)", rep.Stats.Acked, kp.Errors())
	}
	if rep.Stats.Unknown > 0 {
		t.Errorf("%d records ended without an acknowledgement (errors: %s): an idempotent producer should retry them to success",
			rep.Stats.Unknown, kp.Errors())
	}
}
