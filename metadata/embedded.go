package metadata

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// Embedded is an etcd server running in this process (single-node mode): one
// member, data under EmbeddedConfig.Dir, client and peer URLs on loopback.
type Embedded struct {
	etcd      *embed.Etcd
	clientURL string
	closeOnce sync.Once
	// closing is set when Close begins: etcd then logs its listeners'
	// "server closed" as errors, which an orderly stop is not.
	closing *atomic.Bool
}

// startAttempts: when ports are chosen here, another process may take one
// between choosing and binding; a few attempts make that harmless.
const startAttempts = 3

// StartEmbedded starts the server and waits until it serves. Restarting on
// the same Dir keeps the data (the client and peer URLs may differ between
// runs: a single member needs no peer).
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	return StartEmbeddedContext(context.Background(), cfg)
}

// StartEmbeddedContext is StartEmbedded that gives up when ctx ends (a
// broker told to stop while etcd is still starting).
func StartEmbeddedContext(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		e, retry, err := startEmbeddedOnce(ctx, cfg)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if !retry {
			break
		}
	}
	return nil, lastErr
}

// startEmbeddedOnce makes one attempt; retry is true when the failure may be
// a port taken by someone else between choosing and binding.
func startEmbeddedOnce(ctx context.Context, cfg EmbeddedConfig) (e *Embedded, retry bool, err error) {
	clientURL, peerURL := cfg.ClientURL, cfg.PeerURL
	chosen := clientURL == "" || peerURL == ""
	if clientURL == "" {
		if clientURL, err = freeLoopbackURL(); err != nil {
			return nil, false, err
		}
	}
	if peerURL == "" {
		if peerURL, err = freeLoopbackURL(); err != nil {
			return nil, false, err
		}
	}
	clientURL, peerURL = withScheme(clientURL), withScheme(peerURL)
	closing := new(atomic.Bool)
	ecfg, err := embedConfig(cfg, clientURL, peerURL, closing)
	if err != nil {
		return nil, false, err
	}
	etcd, err := embed.StartEtcd(ecfg)
	if err != nil {
		return nil, chosen && strings.Contains(err.Error(), "address already in use"),
			fmt.Errorf("metadata: start embedded etcd: %w", err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
		return &Embedded{etcd: etcd, clientURL: clientURL, closing: closing}, false, nil
	case err := <-etcd.Err():
		closing.Store(true)
		etcd.Close()
		return nil, false, fmt.Errorf("metadata: embedded etcd failed: %w", err)
	case <-ctx.Done():
		closing.Store(true)
		etcd.Server.Stop()
		etcd.Close()
		return nil, false, fmt.Errorf("metadata: embedded etcd start abandoned: %w", ctx.Err())
	case <-time.After(cfg.StartTimeout):
		closing.Store(true)
		etcd.Server.Stop()
		etcd.Close()
		return nil, false, fmt.Errorf("metadata: embedded etcd not ready after %v", cfg.StartTimeout)
	}
}

// embedConfig builds etcd's config: one member named "strata", quiet
// logging, hourly compaction so the history does not grow without bound.
func embedConfig(cfg EmbeddedConfig, clientURL, peerURL string, closing *atomic.Bool) (*embed.Config, error) {
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("metadata: client URL %q: %w", clientURL, err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return nil, fmt.Errorf("metadata: peer URL %q: %w", peerURL, err)
	}
	ecfg := embed.NewConfig()
	ecfg.Name = "strata"
	ecfg.Dir = cfg.Dir
	ecfg.ListenClientUrls, ecfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ecfg.ListenPeerUrls, ecfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ecfg.InitialCluster = ecfg.InitialClusterFromName(ecfg.Name)
	ecfg.Logger = "zap"
	ecfg.LogLevel = "error"
	ecfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapToSlog(cfg.Logger, zapcore.ErrorLevel, closing))
	ecfg.AutoCompactionMode = embed.CompactorModePeriodic
	ecfg.AutoCompactionRetention = "1h"
	return ecfg, nil
}

// withScheme accepts host:port for a URL, as etcd's flags do not.
func withScheme(u string) string {
	if strings.Contains(u, "://") {
		return u
	}
	return "http://" + u
}

// freeLoopbackURL asks the OS for a free port on 127.0.0.1.
func freeLoopbackURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("metadata: find a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("metadata: find a free port: %w", err)
	}
	return "http://" + addr, nil
}

// Endpoints returns the client URL to pass in Config.Endpoints.
func (e *Embedded) Endpoints() []string { return []string{e.clientURL} }

// Close stops the server (waiting for it) and is safe to call twice.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
		<-e.etcd.Server.StopNotify()
	})
	return nil
}
