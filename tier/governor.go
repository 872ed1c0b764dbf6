package tier

// The cold-read governor: the cold path's byte rate follows the hot path's
// health, so a flat-out backfill cannot take the CPU the tail's producers
// and consumers need. See doc.go, "Cold-read governor", for the control
// law and why its constants are what they are.

import (
	"sync"
	"sync/atomic"
	"time"
)

// Governor defaults.
const (
	// DefaultGovernorTarget is the run-queue wait, in thread-seconds per
	// second, the governor steers the broker to while hot requests run.
	DefaultGovernorTarget   = 0.3
	DefaultGovernorInterval = 100 * time.Millisecond
	// DefaultGovernorFloor is the lowest rate the governor sets: a backfill
	// always progresses.
	DefaultGovernorFloor = 4 << 20
	// DefaultGovernorStep is the additive increase per calm interval.
	DefaultGovernorStep = 8 << 20
	// DefaultGovernorCeiling: a limit raised past it is lifted entirely.
	DefaultGovernorCeiling = 1 << 30
)

// GovernorConfig configures the cold-read governor. Zero fields take the
// defaults; a negative Target turns the governor off.
type GovernorConfig struct {
	// Target is the run-queue wait of the broker's threads, in seconds
	// per second (run_delay.go), the governor steers to while hot requests
	// run.
	Target float64
	// Interval is how often the limit is adjusted.
	Interval time.Duration
	// Floor, Step and Ceiling bound the limit, in bytes per second: it never
	// drops below Floor, rises by Step per calm interval, and is lifted once
	// past Ceiling.
	Floor, Step, Ceiling int64
}

// Enabled says whether the governor runs.
func (c GovernorConfig) Enabled() bool { return c.Target >= 0 }

func (c GovernorConfig) withDefaults() GovernorConfig {
	if c.Target == 0 {
		c.Target = DefaultGovernorTarget
	}
	if c.Interval <= 0 {
		c.Interval = DefaultGovernorInterval
	}
	if c.Floor <= 0 {
		c.Floor = DefaultGovernorFloor
	}
	if c.Step <= 0 {
		c.Step = DefaultGovernorStep
	}
	if c.Ceiling <= 0 {
		c.Ceiling = DefaultGovernorCeiling
	}
	return c
}

// governorInput is what one interval showed.
type governorInput struct {
	// runDelay is the interval's run-queue wait, seconds per second.
	runDelay float64
	// hot says a hot request (produce, or a fetch read from local logs)
	// ran during the interval.
	hot bool
	// coldRate is the cold path's GET bytes per second over the interval.
	coldRate float64
}

// governorLaw is the pure control law (AIMD on a byte rate). limit 0 means
// unlimited. Owned by the governor's loop.
type governorLaw struct {
	cfg   GovernorConfig
	limit float64
}

// step adjusts the limit to one interval's input.
func (l *governorLaw) step(in governorInput) {
	floor, ceiling := float64(l.cfg.Floor), float64(l.cfg.Ceiling)
	switch {
	case !in.hot:
		// Nothing hot to protect: the backfill may have every core.
		l.limit = 0
	case in.runDelay > l.cfg.Target:
		if l.limit == 0 {
			if in.coldRate == 0 {
				return // the cold path is idle: it is not the cause
			}
			l.limit = in.coldRate
		}
		l.limit = max(floor, l.limit/2)
	case l.limit > 0:
		l.limit += float64(l.cfg.Step)
		if l.limit > ceiling {
			l.limit = 0
		}
	}
}

// GovernorStats are the governor's gauges and counters.
type GovernorStats struct {
	// Enabled: the governor runs.
	Enabled bool
	// Limit is the current cold byte rate limit; 0 while unlimited.
	Limit int64
	// RunDelay is the last interval's run-queue wait (seconds per second),
	// the signal.
	RunDelay float64
	// Throttled is the total time cold GETs waited for the governor.
	Throttled time.Duration
}

// governor runs the law every Interval and meters cold GETs against its
// limit. Safe for concurrent use.
type governor struct {
	cfg     GovernorConfig
	hot     atomic.Int64 // hot requests seen since the last step
	limit   atomic.Int64 // the law's limit, bytes/s; 0 unlimited
	signal  atomic.Int64 // the last runDelay, in millionths
	waited  atomic.Int64 // ns GETs waited for the limit
	bucket  *byteQuota   // the limit's token bucket, rate changed by steps
	sampler *runDelaySampler

	mu       sync.Mutex
	law      governorLaw // guarded by mu (only the loop steps it)
	getBytes int64       // cold GET bytes at the last step; guarded by mu
	delayed  int64       // the sampler's total at the last step; guarded by mu
	lastStep time.Time   // guarded by mu
}

// newGovernor returns a governor over sampler (nil: a test feeds tick its
// totals through a sampler-less governor).
func newGovernor(cfg GovernorConfig, sampler *runDelaySampler, blockBytes int64, now func() time.Time) *governor {
	cfg = cfg.withDefaults()
	g := &governor{cfg: cfg, law: governorLaw{cfg: cfg}, bucket: newByteQuota(cfg.Floor, blockBytes, now),
		sampler: sampler, lastStep: now()}
	if sampler != nil {
		g.delayed, _ = sampler.total()
	}
	return g
}

// noteHot records one hot request.
func (g *governor) noteHot() { g.hot.Add(1) }

// sample reads the sampler and ticks.
func (g *governor) sample(now time.Time, getBytes int64) {
	delayed, err := g.sampler.total()
	if err != nil {
		delayed = g.delayed // no signal this interval: counts as calm
	}
	g.tick(now, getBytes, delayed)
}

// tick feeds the law one interval: the run-queue wait from delayed (the
// sampler's total), whether anything hot ran, and the cold GET rate from
// getBytes (the cold path's total).
func (g *governor) tick(now time.Time, getBytes, delayed int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	elapsed := now.Sub(g.lastStep).Seconds()
	in := governorInput{hot: g.hot.Swap(0) > 0}
	if elapsed > 0 {
		in.coldRate = float64(getBytes-g.getBytes) / elapsed
		in.runDelay = float64(max(delayed-g.delayed, 0)) / 1e9 / elapsed
	}
	g.getBytes, g.delayed, g.lastStep = getBytes, delayed, now
	g.law.step(in)
	g.signal.Store(int64(in.runDelay * 1e6))
	g.limit.Store(int64(g.law.limit))
	if g.law.limit > 0 {
		g.bucket.setRate(g.law.limit)
	}
}

// delay reserves n bytes under the limit and returns how long to wait
// before fetching them (0 while unlimited).
func (g *governor) delay(n int64) time.Duration {
	if g.limit.Load() == 0 {
		return 0
	}
	d := g.bucket.reserve(n)
	if d > 0 {
		g.waited.Add(int64(d))
	}
	return d
}

func (g *governor) stats() GovernorStats {
	return GovernorStats{Enabled: true, Limit: g.limit.Load(), RunDelay: float64(g.signal.Load()) / 1e6,
		Throttled: time.Duration(g.waited.Load())}
}
