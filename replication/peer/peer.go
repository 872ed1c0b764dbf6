package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// MaxResponseBytes bounds what a client reads for one response before
	// allocating (franz-go's BrokerMaxReadBytes).
	MaxResponseBytes = 100 << 20
	// RequestOverhead is added to a request's own wait to time it out (a
	// blackholed link must not hold a caller forever); it also bounds
	// connecting.
	RequestOverhead = 5 * time.Second
)

// Client sends requests to one peer broker.
type Client interface {
	// Request sends req and returns its response (kmsg encodes both).
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// Config says how to reach one peer.
type Config struct {
	// Addr is the peer's host:port.
	Addr string
	// ClientID is sent with every request.
	ClientID string
	// Overhead bounds the wait for each answer beyond the request's own
	// timeout; zero means RequestOverhead. Callers whose peer may hold a
	// request longer than its own timeout says raise it.
	Overhead time.Duration
	// Security is the inter-broker listener's protocol.
	Security Security
}

// kgoClient is a franz-go client talking to its one seed broker directly.
type kgoClient struct {
	cl     *kgo.Client
	broker *kgo.Broker
}

var _ Client = (*kgoClient)(nil)

// Dial makes the client for the peer at cfg.Addr (it connects lazily).
func Dial(cfg Config) (Client, error) {
	overhead := cfg.Overhead
	if overhead <= 0 {
		overhead = RequestOverhead
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Addr),
		kgo.ClientID(cfg.ClientID),
		kgo.BrokerMaxReadBytes(MaxResponseBytes),
		kgo.DialTimeout(RequestOverhead),
		kgo.RequestTimeoutOverhead(overhead),
	}
	security, err := cfg.Security.opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, security...)...)
	if err != nil {
		return nil, fmt.Errorf("peer: client for %s: %w", cfg.Addr, err)
	}
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		cl.Close()
		return nil, fmt.Errorf("peer: client for %s has %d seeds", cfg.Addr, len(seeds))
	}
	return &kgoClient{cl: cl, broker: seeds[0]}, nil
}

func (k *kgoClient) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return k.broker.Request(ctx, req)
}

func (k *kgoClient) Close() { k.cl.Close() }
