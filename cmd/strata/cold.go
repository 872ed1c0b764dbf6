package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/tier"
)

// coldMetric maps one tier.ColdStats field to a Prometheus metric.
type coldMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(tier.ColdStats) float64
}

func coldCounter(name, help string, value func(tier.ColdStats) int64) coldMetric {
	return coldMetric{
		desc:  prometheus.NewDesc(name, help, nil, nil),
		kind:  prometheus.CounterValue,
		value: func(s tier.ColdStats) float64 { return float64(value(s)) },
	}
}

// coldMetrics lists every ColdStats field. The block cache hit ratio is
// strata_cold_cache_hits_total / (hits + strata_cold_cache_misses_total),
// so no ratio gauge is exported.
var coldMetrics = []coldMetric{
	coldCounter("strata_cold_cache_hits_total", "Cold reads of a block found in the cold cache.",
		func(s tier.ColdStats) int64 { return s.BlockHits }),
	coldCounter("strata_cold_cache_misses_total", "Cold reads of a block not in the cold cache (fetched, or joined a GET in flight).",
		func(s tier.ColdStats) int64 { return s.BlockMisses }),
	coldCounter("strata_cold_shared_gets_total", "Cold cache misses that joined a block GET already in flight.",
		func(s tier.ColdStats) int64 { return s.SharedGets }),
	coldCounter("strata_cold_gets_total", "Block GETs issued by the cold reader (retries included).",
		func(s tier.ColdStats) int64 { return s.Gets }),
	coldCounter("strata_cold_get_bytes_total", "Bytes received by the cold reader's block GETs.",
		func(s tier.ColdStats) int64 { return s.GetBytes }),
	coldCounter("strata_cold_get_errors_total", "Failed block GETs of the cold reader (retries included).",
		func(s tier.ColdStats) int64 { return s.GetErrors }),
	coldCounter("strata_cold_read_ahead_blocks_total", "Blocks fetched ahead of a sequential cold reader.",
		func(s tier.ColdStats) int64 { return s.ReadAheadBlocks }),
	coldCounter("strata_cold_corrupt_blocks_total", "Blocks or object indexes that failed their CRC (never served).",
		func(s tier.ColdStats) int64 { return s.CorruptBlocks }),
	coldCounter("strata_cold_index_cache_hits_total", "Object index lookups found in the cold index cache.",
		func(s tier.ColdStats) int64 { return s.IndexHits }),
	coldCounter("strata_cold_index_cache_misses_total", "Object index lookups that fetched the object's footer and index.",
		func(s tier.ColdStats) int64 { return s.IndexMisses }),
	{
		desc:  prometheus.NewDesc("strata_cold_cache_bytes", "Bytes held in the cold cache now.", nil, nil),
		kind:  prometheus.GaugeValue,
		value: func(s tier.ColdStats) float64 { return float64(s.CachedBytes) },
	},
	{
		desc: prometheus.NewDesc("strata_cold_quota_wait_seconds_total",
			"Time cold GETs waited for the --cold-bytes-per-second quota.", nil, nil),
		kind:  prometheus.CounterValue,
		value: func(s tier.ColdStats) float64 { return s.QuotaWait.Seconds() },
	},
	{
		desc: prometheus.NewDesc("strata_cold_governor_limit_bytes_per_second",
			"The cold-read governor's current limit on the cold GET byte rate (0: unlimited or off).", nil, nil),
		kind:  prometheus.GaugeValue,
		value: func(s tier.ColdStats) float64 { return float64(s.Governor.Limit) },
	},
	{
		desc: prometheus.NewDesc("strata_cold_governor_throttled_seconds_total",
			"Time cold GETs waited for the cold-read governor's limit.", nil, nil),
		kind:  prometheus.CounterValue,
		value: func(s tier.ColdStats) float64 { return s.Governor.Throttled.Seconds() },
	},
	{
		desc: prometheus.NewDesc("strata_cold_governor_run_delay",
			"The signal the cold-read governor steers by: seconds per second the broker's threads waited for a CPU over its last interval.", nil, nil),
		kind:  prometheus.GaugeValue,
		value: func(s tier.ColdStats) float64 { return s.Governor.RunDelay },
	},
}

// coldCollector maps the cold reader's snapshot to Prometheus at scrape
// time; stats is Broker.ColdStats (all zero when tiering is off).
type coldCollector struct{ stats func() tier.ColdStats }

func (c coldCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range coldMetrics {
		ch <- m.desc
	}
}

func (c coldCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, m := range coldMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(s))
	}
}

// serveCold publishes the cold reader's counters on /metrics.
func (h *httpServer) serveCold(stats func() tier.ColdStats) {
	if err := h.reg.Register(coldCollector{stats: stats}); err != nil {
		h.log.Warn("registering cold reader metrics", "err", err)
	}
}
