package txn

import (
	"fmt"
	"log/slog"
	"time"
)

// Config configures the coordinator. Zero values get Kafka's defaults
// (WithDefaults).
type Config struct {
	// Partitions (transaction.state.log.num.partitions). Default 50. Never
	// change it once the topic exists: it maps ids to partitions.
	Partitions int32
	// MaxTimeout (transaction.max.timeout.ms): larger
	// transaction.timeout.ms get INVALID_TRANSACTION_TIMEOUT. Default 15min.
	MaxTimeout time.Duration
	// Expiration (transactional.id.expiration.ms): an id idle this long
	// outside a transaction is forgotten. Default 7 days.
	Expiration time.Duration
	// TickInterval (transaction.abort.timed.out.transaction.cleanup.interval.ms):
	// how often timed-out transactions are aborted and ids expired.
	// Default 10s; tests lower it.
	TickInterval time.Duration
	// MarkerRetryBackoff is the first wait before resending markers to
	// partitions that did not take them (doubling up to 2s). Default 100ms.
	MarkerRetryBackoff time.Duration
	Logger             *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults fills zero fields with Kafka's defaults.
func (c Config) WithDefaults() Config {
	if c.Partitions == 0 {
		c.Partitions = 50
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.Expiration == 0 {
		c.Expiration = 7 * 24 * time.Hour
	}
	if c.TickInterval == 0 {
		c.TickInterval = 10 * time.Second
	}
	if c.MarkerRetryBackoff == 0 {
		c.MarkerRetryBackoff = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate rejects configurations that cannot work (after WithDefaults).
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > 10_000:
		return fmt.Errorf("%w: transaction.state.log.num.partitions %d", ErrInvalidConfig, c.Partitions)
	case c.MaxTimeout < time.Millisecond || c.MaxTimeout.Milliseconds() > 1<<31-1:
		return fmt.Errorf("%w: transaction.max.timeout.ms %v", ErrInvalidConfig, c.MaxTimeout)
	case c.Expiration <= 0 || c.TickInterval <= 0 || c.MarkerRetryBackoff <= 0:
		return fmt.Errorf("%w: non-positive expiration or interval", ErrInvalidConfig)
	}
	return nil
}
