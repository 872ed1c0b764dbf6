package group

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-log/strata/broker/group/consumer"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("group: invalid config")

// OffsetsTopic is the internal topic holding commits and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Config configures the coordinator. Zero values get Kafka's defaults
// (WithDefaults).
type Config struct {
	// OffsetsTopicPartitions (offsets.topic.num.partitions). Default 50.
	// Never change it once the topic exists: it maps groups to partitions.
	OffsetsTopicPartitions int32
	// InitialRebalanceDelay (group.initial.rebalance.delay.ms): how long a
	// rebalance of an Empty group waits for more members. Default 3s; tests
	// lower it. Negative means 0.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout, MaxSessionTimeout (group.min/max.session.timeout.ms):
	// the accepted session.timeout.ms range. Defaults 6s and 30min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// OffsetsRetention (offsets.retention.minutes): how long offsets of an
	// Empty group (or of a group that never had members) are kept after
	// the later of the group becoming Empty and the commit. Default 7 days.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval (offsets.retention.check.interval.ms).
	// Default 10 minutes.
	OffsetsRetentionCheckInterval time.Duration
	// TickInterval is how often the coordinator advances the machine's
	// clock (session and rebalance deadlines resolve at this granularity).
	// Default 100ms.
	TickInterval time.Duration
	// OffsetMetadataMaxBytes (offset.metadata.max.bytes): longer commit
	// metadata gets OFFSET_METADATA_TOO_LARGE. Default 4096.
	OffsetMetadataMaxBytes int
	// MaxGroupSize (group.max.size): joins beyond it get GROUP_MAX_SIZE_REACHED. Default unlimited (0).
	MaxGroupSize int
	// Consumer configures the groups of the consumer protocol (KIP-848,
	// group.consumer.*: assignor, session timeout, heartbeat interval, max
	// size); zero values get Kafka's defaults (consumer.Config).
	Consumer consumer.Config
	Logger   *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults fills zero fields with Kafka's defaults.
func (c Config) WithDefaults() Config {
	if c.OffsetsTopicPartitions == 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = 4096
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
	case c.OffsetsTopicPartitions < 1 || c.OffsetsTopicPartitions > 10_000:
		return fmt.Errorf("%w: offsets.topic.num.partitions %d", ErrInvalidConfig, c.OffsetsTopicPartitions)
	case c.MinSessionTimeout <= 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("%w: session timeout range [%v, %v]", ErrInvalidConfig, c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.OffsetsRetention < 0 || c.OffsetsRetentionCheckInterval <= 0 || c.TickInterval <= 0:
		return fmt.Errorf("%w: negative retention or interval", ErrInvalidConfig)
	case c.OffsetMetadataMaxBytes < 0 || c.MaxGroupSize < 0:
		return fmt.Errorf("%w: negative limit", ErrInvalidConfig)
	}
	if err := c.Consumer.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: group.consumer: %v", ErrInvalidConfig, err)
	}
	return nil
}

// machineConfig is what the pure machine needs, in milliseconds.
func (c Config) machineConfig() MachineConfig {
	return MachineConfig{
		InitialRebalanceDelayMs: c.InitialRebalanceDelay.Milliseconds(),
		MinSessionTimeoutMs:     int32(min(c.MinSessionTimeout.Milliseconds(), 1<<31-1)),
		MaxSessionTimeoutMs:     int32(min(c.MaxSessionTimeout.Milliseconds(), 1<<31-1)),
		OffsetsRetentionMs:      c.OffsetsRetention.Milliseconds(),
		MaxGroupSize:            c.MaxGroupSize,
	}
}
