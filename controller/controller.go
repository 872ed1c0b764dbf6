package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/metadata"
)

// ErrInvalidConfig: Config.Validate failed.
var ErrInvalidConfig = errors.New("controller: invalid config")

// Config configures a controller candidate.
type Config struct {
	// NodeID is this broker's id (the election value). Must be >= 0.
	NodeID int32
	// Store is the metadata store (its etcd client runs the election).
	// Required.
	Store *metadata.Store
	// SessionTTL is the election session's lease TTL, rounded up to whole
	// seconds: how long a crashed controller keeps the role. Default 10s.
	// Brokers pass their registration TTL when it is shorter, so that a
	// failover is not held up by the controller's own lease.
	SessionTTL time.Duration
	// Debounce is how long the active controller waits after a change
	// before planning, to batch a burst of events. Default 50ms.
	Debounce time.Duration
	// ReplanInterval is how often the active controller plans without a
	// change (retries of failed writes). Default 2s.
	ReplanInterval time.Duration
	// RebalanceInterval is leader.imbalance.check.interval.seconds: how
	// often the active controller moves leadership back to preferred
	// replicas (Rebalance; auto.leader.rebalance.enable). Default 5m;
	// negative disables it.
	RebalanceInterval time.Duration
	// ImbalancePercentage is leader.imbalance.per.broker.percentage.
	// Default 10.
	ImbalancePercentage int
	// AutoBalanceInterval is how often the active controller balances
	// replicas and preferred leaderships itself (AutoBalance, then the
	// preferred leaders elected as Rebalance does). 0 or negative: never,
	// the default (operators balance with `strata cluster balance`).
	AutoBalanceInterval time.Duration
	// AutoBalanceMaxMoves bounds the moves one auto-balance round begins.
	// Default DefaultAutoBalanceMaxMoves.
	AutoBalanceMaxMoves int
	// Logger; default slog.Default().
	Logger *slog.Logger
}

const (
	defaultSessionTTL     = 10 * time.Second
	defaultDebounce       = 50 * time.Millisecond
	defaultReplanInterval = 2 * time.Second
	defaultRebalance      = 5 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.SessionTTL == 0 {
		c.SessionTTL = defaultSessionTTL
	}
	if c.Debounce == 0 {
		c.Debounce = defaultDebounce
	}
	if c.ReplanInterval == 0 {
		c.ReplanInterval = defaultReplanInterval
	}
	if c.RebalanceInterval == 0 {
		c.RebalanceInterval = defaultRebalance
	}
	if c.ImbalancePercentage == 0 {
		c.ImbalancePercentage = DefaultImbalancePercentage
	}
	if c.AutoBalanceMaxMoves == 0 {
		c.AutoBalanceMaxMoves = DefaultAutoBalanceMaxMoves
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the config after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: no metadata store", ErrInvalidConfig)
	case c.NodeID < 0:
		return fmt.Errorf("%w: node id %d", ErrInvalidConfig, c.NodeID)
	case c.SessionTTL < 0 || c.Debounce < 0 || c.ReplanInterval <= 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.ImbalancePercentage < 0 || c.ImbalancePercentage > 100:
		return fmt.Errorf("%w: imbalance percentage %d", ErrInvalidConfig, c.ImbalancePercentage)
	case c.AutoBalanceMaxMoves < 0:
		return fmt.Errorf("%w: auto-balance max moves %d", ErrInvalidConfig, c.AutoBalanceMaxMoves)
	}
	return nil
}

// sessionTTLSeconds is the lease TTL etcd is asked for.
func (c Config) sessionTTLSeconds() int {
	return max(1, int((c.SessionTTL+time.Second-1)/time.Second))
}

// Controller is one broker's controller candidate: it campaigns in the
// background and, while elected, keeps every partition led (Plan).
//
// State ownership: observed is written only by the observer goroutine,
// active only by the campaign goroutine; both are read anywhere. The
// leader's view lives in its goroutine (leader type).
type Controller struct {
	cfg Config
	log *slog.Logger
	// observed is the elected controller's node id as last read from
	// etcd; -1 when none is elected or etcd does not answer.
	observed atomic.Int32
	// active is true from a won campaign until this candidate stops acting
	// (Close, ctx end, session lost, fenced).
	active atomic.Bool

	stop      context.CancelFunc
	running   sync.WaitGroup
	closeOnce sync.Once
}

// Start begins campaigning; the controller runs until Close or ctx ends.
func Start(ctx context.Context, cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: cfg.Logger.With("component", "controller", "node", cfg.NodeID)}
	c.observed.Store(-1)
	runCtx, stop := context.WithCancel(ctx)
	c.stop = stop
	c.running.Add(2)
	go func() { defer c.running.Done(); c.observeLoop(runCtx) }()
	go func() { defer c.running.Done(); c.campaignLoop(runCtx) }()
	return c, nil
}

// ID is the node id of the elected controller as last observed; -1 unknown.
func (c *Controller) ID() int32 {
	if c.active.Load() {
		return c.cfg.NodeID
	}
	return c.observed.Load()
}

// WaitKnown returns once the elected controller is known (ID() >= 0):
// true, or false when ctx ends first.
func (c *Controller) WaitKnown(ctx context.Context) bool {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for c.ID() < 0 {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// Active reports whether this candidate is the elected controller.
func (c *Controller) Active() bool { return c.active.Load() }

// closeWait bounds Close: concurrency.Election.Campaign, cancelled while
// waiting for its predecessor, resigns on the client's own context, which
// blocks while etcd is unreachable (until the store's client closes).
const closeWait = 5 * time.Second

// Close resigns (if elected) and stops; it returns after at most
// closeWait, even if etcd does not answer (the goroutines then end when
// the store closes). Safe to call twice.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.stop()
		done := make(chan struct{})
		go func() { c.running.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeWait):
			// Only a campaign can still be running (a term ends with ctx),
			// so this candidate is not active.
			c.log.Warn("controller did not stop in time; it ends when the metadata store closes", "waited", closeWait)
		}
	})
	return nil
}

// backoff doubles a delay from min to max; reset after success.
type backoff struct{ min, max, next time.Duration }

func newBackoff(min, max time.Duration) backoff { return backoff{min: min, max: max, next: min} }

func (b *backoff) wait(ctx context.Context) {
	sleepCtx(ctx, b.next)
	b.next = min(2*b.next, b.max)
}

func (b *backoff) reset() { b.next = b.min }

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
