package main

import (
	"flag"
	"time"

	"github.com/strata-log/strata/broker/group/consumer"
)

// consumerGroupFlags configure groups of the consumer protocol (KIP-848),
// named after Kafka's group.consumer.* settings.
type consumerGroupFlags struct {
	assignors         string
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
	maxSize           int
}

func (f *consumerGroupFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.assignors, "group-consumer-assignors", "uniform,range",
		"server-side assignors consumer-protocol members may name, the first the default (group.consumer.assignors)")
	fs.DurationVar(&f.sessionTimeout, "group-consumer-session-timeout", 45*time.Second,
		"a consumer-protocol member silent this long is removed (group.consumer.session.timeout.ms)")
	fs.DurationVar(&f.heartbeatInterval, "group-consumer-heartbeat-interval", 5*time.Second,
		"heartbeat interval told to consumer-protocol members (group.consumer.heartbeat.interval.ms)")
	fs.IntVar(&f.maxSize, "group-consumer-max-size", 0,
		"most members of one consumer-protocol group, 0: unlimited (group.consumer.max.size)")
}

// config validates the flags and converts them.
func (f *consumerGroupFlags) config() (consumer.Config, error) {
	var cfg consumer.Config
	names := splitList(f.assignors)
	if len(names) == 0 {
		return cfg, usageErrorf("--group-consumer-assignors is empty (want uniform, range or both)")
	}
	for _, name := range names {
		a, ok := consumer.AssignorByName(name)
		if !ok {
			return cfg, usageErrorf("--group-consumer-assignors: unknown assignor %q (want uniform, range)", name)
		}
		cfg.Assignors = append(cfg.Assignors, a)
	}
	switch {
	case f.sessionTimeout < time.Millisecond || f.sessionTimeout > time.Duration(1<<31-1)*time.Millisecond:
		return cfg, usageErrorf("--group-consumer-session-timeout %s: want 1ms..24d", f.sessionTimeout)
	case f.heartbeatInterval < time.Millisecond || f.heartbeatInterval >= f.sessionTimeout:
		return cfg, usageErrorf("--group-consumer-heartbeat-interval %s: want ≥ 1ms and below the session timeout", f.heartbeatInterval)
	case f.maxSize < 0:
		return cfg, usageErrorf("--group-consumer-max-size %d: want ≥ 0", f.maxSize)
	}
	cfg.SessionTimeoutMs = f.sessionTimeout.Milliseconds()
	cfg.HeartbeatIntervalMs = int32(f.heartbeatInterval.Milliseconds())
	cfg.MaxSize = f.maxSize
	if err := cfg.Validate(); err != nil {
		return cfg, usageErrorf("--group-consumer-*: %v", err)
	}
	return cfg, nil
}
