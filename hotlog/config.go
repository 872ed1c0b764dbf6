package hotlog

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("hotlog: invalid config")

// Defaults, as Kafka's.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * time.Hour
	DefaultIndexIntervalBytes = 4096
	DefaultRetentionMs        = 7 * 24 * time.Hour
	DefaultRetentionBytes     = -1
	// minSegmentBytes is Kafka's lower bound for segment.bytes.
	minSegmentBytes = 14
)

// withDefaults returns c with zero values replaced by defaults.
func (c Config) withDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentMs == 0 {
		c.SegmentMs = DefaultSegmentMs
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = DefaultRetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = DefaultRetentionBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate rejects configs the log cannot honour. Call it on a config after
// defaults; zero values are valid (they mean "default").
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is empty", ErrInvalidConfig)
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("%w: SegmentBytes %d not in [%d, %d]", ErrInvalidConfig, c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case c.SegmentMs < time.Millisecond:
		return fmt.Errorf("%w: SegmentMs %v < 1ms", ErrInvalidConfig, c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: IndexIntervalBytes %d < 0", ErrInvalidConfig, c.IndexIntervalBytes)
	case c.Durability != DurabilityFsync && c.Durability != DurabilityReplication:
		return fmt.Errorf("%w: Durability %d", ErrInvalidConfig, c.Durability)
	case c.FlushInterval < 0:
		return fmt.Errorf("%w: FlushInterval %v < 0", ErrInvalidConfig, c.FlushInterval)
	}
	return nil
}
