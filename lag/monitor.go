package lag

import (
	"log/slog"
	"math"
	"sync"
	"time"
)

// Committed is one group's committed offset on one partition.
type Committed struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
	CommitMs  int64 // unix ms
}

// Source is what the monitor reads at each refresh; the broker implements
// it over its group coordinator and its partitions.
type Source interface {
	// CommittedOffsets lists the committed offsets of the groups this
	// broker coordinates.
	CommittedOffsets() []Committed
	// Partition is the state of a partition this broker holds a replica
	// of, with LogEnd its log end offset; ok false when it holds none.
	Partition(topic string, partition int32) (p Partition, logEnd int64, ok bool)
	// RecordTimestamp is the timestamp of the record at offset (or of its
	// batch); ok false when unknown.
	RecordTimestamp(topic string, partition int32, offset int64) (int64, bool)
}

// Series is one group's lag and margin on one partition.
type Series struct {
	Group         string
	Topic         string
	Partition     int32
	Committed     int64
	HighWatermark int64
	Records       int64   // behind the high watermark
	Seconds       float64 // behind in time
	Margin        Margin
}

// MonitorConfig tunes a Monitor.
type MonitorConfig struct {
	// WarnMargin: a group whose margin is below it is logged (0: never).
	WarnMargin time.Duration
	// WarnEvery is how often one group's partition is logged again while
	// its margin stays low. Zero: 10 minutes.
	WarnEvery time.Duration
	// MaxSeries bounds the series of one refresh; the rest are left out
	// (and that is logged). Zero: 100,000.
	MaxSeries int
	// RateHalfLife is Rate's. Zero: 5 minutes.
	RateHalfLife time.Duration
	Logger       *slog.Logger
}

// Monitor computes every group's lag and retention margin on each Refresh
// and keeps the result for scrapes, so a scrape costs a copy. The record
// timestamps it looks up are cached while the committed offset stays.
type Monitor struct {
	cfg MonitorConfig
	src Source

	refreshMu  sync.Mutex // one refresh at a time; guards the fields below
	rates      map[partitionKey]*Rate
	timestamps map[seriesKey]offsetTime
	lastWarn   map[seriesKey]warned
	truncated  bool

	mu     sync.Mutex
	series []Series
}

type partitionKey struct {
	topic     string
	partition int32
}

type seriesKey struct {
	group string
	partitionKey
}

type offsetTime struct{ offset, ts int64 }

// warned is when a series was last logged, and whether it had lost data.
type warned struct {
	at   time.Time
	lost bool
}

// NewMonitor returns a monitor reading src.
func NewMonitor(cfg MonitorConfig, src Source) *Monitor {
	if cfg.WarnEvery == 0 {
		cfg.WarnEvery = 10 * time.Minute
	}
	if cfg.MaxSeries == 0 {
		cfg.MaxSeries = 100_000
	}
	if cfg.RateHalfLife == 0 {
		cfg.RateHalfLife = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Monitor{cfg: cfg, src: src, rates: map[partitionKey]*Rate{},
		timestamps: map[seriesKey]offsetTime{}, lastWarn: map[seriesKey]warned{}}
}

// Series returns the last refresh's series, sorted as the source lists
// the committed offsets.
func (m *Monitor) Series() []Series {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.series
}

// Refresh recomputes every series at now and logs the groups whose margin
// is below WarnMargin.
func (m *Monitor) Refresh(now time.Time) {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	offsets := m.src.CommittedOffsets()
	if len(offsets) > m.cfg.MaxSeries {
		if !m.truncated {
			m.cfg.Logger.Warn("too many consumer group partitions for lag metrics; the rest are left out",
				"series", len(offsets), "max", m.cfg.MaxSeries)
		}
		m.truncated, offsets = true, offsets[:m.cfg.MaxSeries]
	}
	parts := map[partitionKey]*partitionAt{}
	timestamps := make(map[seriesKey]offsetTime, len(offsets))
	series := make([]Series, 0, len(offsets))
	seen := make(map[seriesKey]bool, len(offsets))
	for _, c := range offsets {
		k := seriesKey{c.Group, partitionKey{c.Topic, c.Partition}}
		seen[k] = true
		p := m.partition(parts, k.partitionKey, now)
		if p == nil {
			continue
		}
		s := Series{Group: c.Group, Topic: c.Topic, Partition: c.Partition, Committed: c.Offset,
			HighWatermark: p.HighWatermark, Records: Records(c.Offset, p.HighWatermark),
			Margin: RetentionMargin(p.Partition, c.Offset, now)}
		if s.Records > 0 {
			ts := m.timestampAt(k, c.Offset)
			timestamps[k] = offsetTime{c.Offset, ts}
			s.Seconds = Seconds(c.Offset, p.HighWatermark, ts, now)
		}
		m.warn(k, s, now)
		series = append(series, s)
	}
	m.timestamps = timestamps
	for k := range m.lastWarn {
		if !seen[k] {
			delete(m.lastWarn, k)
		}
	}
	for k := range m.rates {
		if parts[k] == nil {
			delete(m.rates, k)
		}
	}
	m.mu.Lock()
	m.series = series
	m.mu.Unlock()
}

// partitionAt is one partition's state within a refresh (nil: not held).
type partitionAt struct{ Partition }

// partition reads a partition once per refresh and feeds its rate.
func (m *Monitor) partition(parts map[partitionKey]*partitionAt, k partitionKey, now time.Time) *partitionAt {
	if p, seen := parts[k]; seen {
		return p
	}
	p, logEnd, ok := m.src.Partition(k.topic, k.partition)
	if !ok {
		parts[k] = nil
		return nil
	}
	r := m.rates[k]
	if r == nil {
		r = &Rate{HalfLife: m.cfg.RateHalfLife}
		m.rates[k] = r
	}
	var bytes int64
	for _, s := range p.Segments {
		bytes += s.Bytes
	}
	p.BytesPerSecond = r.Observe(now, logEnd, bytes, logEnd-p.LogStart)
	at := &partitionAt{p}
	parts[k] = at
	return at
}

// timestampAt is the timestamp of the record at offset, from the cache
// when the group has not moved since the last refresh.
func (m *Monitor) timestampAt(k seriesKey, offset int64) int64 {
	if c, ok := m.timestamps[k]; ok && c.offset == offset && c.ts > 0 {
		return c.ts
	}
	ts, ok := m.src.RecordTimestamp(k.topic, k.partition, offset)
	if !ok {
		return 0
	}
	return ts
}

// warn logs a group whose margin is below WarnMargin, at most once per
// WarnEvery per partition, and again at once when it has lost data.
func (m *Monitor) warn(k seriesKey, s Series, now time.Time) {
	low := s.Margin.Limited && (s.Margin.Lost || s.Margin.Seconds < m.cfg.WarnMargin.Seconds())
	if m.cfg.WarnMargin <= 0 || !low {
		delete(m.lastWarn, k)
		return
	}
	if last, ok := m.lastWarn[k]; ok && now.Sub(last.at) < m.cfg.WarnEvery && last.lost == s.Margin.Lost {
		return
	}
	m.lastWarn[k] = warned{now, s.Margin.Lost}
	args := []any{"group", s.Group, "topic", s.Topic, "partition", s.Partition, "committed", s.Committed,
		"lag", s.Records}
	if s.Margin.Lost {
		m.cfg.Logger.Warn("consumer group has lost data: its committed offset is below the log start", args...)
		return
	}
	args = append(args, "margin", marginText(s.Margin.Seconds), "warn_margin", m.cfg.WarnMargin)
	if s.Margin.Bytes != math.MaxInt64 {
		args = append(args, "margin_bytes", s.Margin.Bytes)
	}
	m.cfg.Logger.Warn("consumer group will lose data to retention unless it catches up", args...)
}

func marginText(seconds float64) string {
	if math.IsInf(seconds, 1) {
		return "unbounded"
	}
	return (time.Duration(seconds) * time.Second).String()
}
