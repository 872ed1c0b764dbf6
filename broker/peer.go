package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/auth"
)

// peerClient sends requests to one peer broker. kgoPeer is the real one;
// tests use scripted fakes.
type peerClient interface {
	// Request sends req and returns its response (kmsg encodes both).
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// kgoPeer is a kgo client talking to its one seed broker directly: no
// metadata routing, ApiVersions negotiated by kgo on connect.
type kgoPeer struct {
	cl     *kgo.Client
	broker *kgo.Broker
}

var _ peerClient = (*kgoPeer)(nil)

// dialPeer makes the client for the peer at addr (it connects lazily).
func (b *Broker) dialPeer(nodeID int32, addr string) (peerClient, error) {
	return b.dialPeerWithOverhead(nodeID, addr, peerRequestOverhead)
}

// dialPeerWithOverhead is dialPeer for requests the peer may hold longer
// (WriteTxnMarkers waits for the HW up to markerAckTimeout): overhead
// bounds the wait for each answer beyond the request's own timeout.
func (b *Broker) dialPeerWithOverhead(nodeID int32, addr string, overhead time.Duration) (peerClient, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID("strata-replica-fetcher-" + strconv.Itoa(int(nodeID))),
		kgo.BrokerMaxReadBytes(replicaMaxResponseBytes),
		kgo.DialTimeout(peerRequestOverhead),
		kgo.RequestTimeoutOverhead(overhead),
	}
	security, err := b.peerSecurityOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, security...)...)
	if err != nil {
		return nil, fmt.Errorf("broker: peer client for %s: %w", addr, err)
	}
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		cl.Close()
		return nil, fmt.Errorf("broker: peer client for %s has %d seeds", addr, len(seeds))
	}
	return &kgoPeer{cl: cl, broker: seeds[0]}, nil
}

// peerSecurityOpts are the TLS and SASL options of the inter-broker
// listener's protocol.
func (b *Broker) peerSecurityOpts() ([]kgo.Opt, error) {
	var l ListenerConfig
	for _, lc := range b.cfg.listeners() {
		if lc.Name == b.cfg.interBrokerListener() {
			l = lc
		}
	}
	var opts []kgo.Opt
	if l.Security.usesTLS() {
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if b.cfg.InterBrokerTLS != nil {
			tlsCfg = b.cfg.InterBrokerTLS.Clone()
		}
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if l.Security.usesSASL() {
		m, err := peerSASLMechanism(b.cfg.InterBrokerSASL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// peerSASLMechanism is franz-go's client side of cfg's mechanism.
func peerSASLMechanism(cfg InterBrokerSASL) (sasl.Mechanism, error) {
	switch cfg.Mechanism {
	case auth.MechPlain:
		return plain.Auth{User: cfg.Username, Pass: cfg.Password}.AsMechanism(), nil
	case auth.MechScramSHA256:
		return scram.Auth{User: cfg.Username, Pass: cfg.Password}.AsSha256Mechanism(), nil
	case auth.MechScramSHA512, "":
		return scram.Auth{User: cfg.Username, Pass: cfg.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: inter-broker SASL mechanism %q", ErrInvalidConfig, cfg.Mechanism)
}

func (k *kgoPeer) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return k.broker.Request(ctx, req)
}

func (k *kgoPeer) Close() { k.cl.Close() }

// peerAddress is where node listens for replication: the PeerAddresses
// override, else its registered inter-broker listener endpoint; "" while
// unknown.
func (b *Broker) peerAddress(node int32) string {
	if addr := b.cfg.PeerAddresses[node]; addr != "" {
		return addr
	}
	for _, info := range b.brokers() {
		if info.NodeID == node {
			return endpointOn(info, b.cfg.interBrokerListener())
		}
	}
	return ""
}

// peerFetcher is the goroutine serving the tasks of one leader.
type peerFetcher struct {
	m      *fetcherManager
	leader int32
	// ctx ends when the peer has no tasks left or the manager closes.
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}             // capacity 1: a pending wake-up
	tasks  map[*partition]*fetchTask // guarded by m.mu
}

func newPeerFetcher(m *fetcherManager, leader int32) *peerFetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	return &peerFetcher{m: m, leader: leader, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), tasks: map[*partition]*fetchTask{}}
}

// poke wakes the peer if it is idle or backing off. Never blocks.
func (f *peerFetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run serves the peer's tasks until its context ends. It owns the client.
func (f *peerFetcher) run() {
	defer f.m.wg.Done()
	var (
		cl      peerClient
		addr    string
		backoff time.Duration
		failing bool
	)
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for f.ctx.Err() == nil {
		if cl == nil {
			var err error
			if cl, addr, err = f.connect(); err != nil {
				failing, backoff = f.failed(failing, backoff, err)
				continue
			}
		}
		if err := f.round(cl); err != nil {
			if f.ctx.Err() != nil {
				return
			}
			if a := f.m.address(f.leader); a != addr { // the leader moved: dial anew
				cl.Close()
				cl = nil
			}
			failing, backoff = f.failed(failing, backoff, err)
			continue
		}
		if failing {
			f.m.log.Info("replica fetcher reconnected", "leader", f.leader)
		}
		failing, backoff = false, 0
	}
}

// connect resolves the leader's address and makes a client.
func (f *peerFetcher) connect() (peerClient, string, error) {
	addr := f.m.address(f.leader)
	if addr == "" {
		return nil, "", fmt.Errorf("broker: no address known for broker %d", f.leader)
	}
	cl, err := f.m.dial(f.leader, addr)
	return cl, addr, err
}

// failed logs the start of a failure streak and sleeps the next back-off.
func (f *peerFetcher) failed(failing bool, backoff time.Duration, err error) (bool, time.Duration) {
	if !failing {
		f.m.log.Warn("replica fetcher cannot reach the leader; retrying", "leader", f.leader, "err", err)
	}
	backoff = min(max(2*backoff, minFetchBackoff), maxFetchBackoff)
	f.sleep(backoff)
	return true, backoff
}

// sleep waits d, or less if the peer is poked or stopped.
func (f *peerFetcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.wake:
	case <-f.ctx.Done():
	}
}

// round sends the pending epoch queries, then one fetch for every
// partition ready to fetch; with nothing to do it sleeps until poked or a
// delayed task is due. A returned error is a connection-level failure.
func (f *peerFetcher) round(cl peerClient) error {
	queries, fetches, due := f.m.work(f, time.Now())
	if len(queries) > 0 {
		if err := f.sendQueries(cl, queries); err != nil {
			return err
		}
	}
	if len(fetches) == 0 {
		if len(queries) == 0 {
			wait := idleRecheck
			if !due.IsZero() {
				wait = min(max(time.Until(due), 0), idleRecheck)
			}
			f.sleep(wait)
		}
		return nil
	}
	return f.fetch(cl, f.flushedBeforeFetch(fetches))
}

// request sends req with a deadline of wait plus the peer overhead.
func (f *peerFetcher) request(cl peerClient, req kmsg.Request, wait time.Duration) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(f.ctx, wait+peerRequestOverhead)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		f.m.counters.requestErrors.Add(1)
		return nil, fmt.Errorf("broker: request %d to broker %d: %w", req.Key(), f.leader, err)
	}
	return resp, nil
}

// errPeerAnswer: the peer answered with a request-level error.
var errPeerAnswer = errors.New("broker: peer refused the request")
