package main

import (
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/lag"
)

// lagMetricsSource is what lagCollector reads at scrape time
// (*broker.Broker; a fake in tests): the lag monitor's last refresh, so a
// scrape costs a copy however many groups there are.
type lagMetricsSource interface {
	ConsumerGroupLag() []lag.Series
	SkippedRecords() []group.Skipped
}

var (
	groupLabels  = []string{"group", "topic", "partition"}
	groupLagDesc = prometheus.NewDesc("strata_consumergroup_lag",
		"Records between a group's committed offset and the partition's high watermark (groups coordinated by this broker, partitions it holds).",
		groupLabels, nil)
	groupLagSecondsDesc = prometheus.NewDesc("strata_consumergroup_lag_seconds",
		"How far behind in time a group is: now minus the timestamp of the record at its committed offset (0 when caught up).",
		groupLabels, nil)
	groupMarginSecondsDesc = prometheus.NewDesc("strata_consumergroup_retention_margin_seconds",
		"Time until retention (retention.ms, or retention.bytes at the recent produce rate; the bucket's total retention) deletes the record at the group's committed offset; 0 when it is gone already. Absent when the topic has no retention limit.",
		groupLabels, nil)
	groupMarginBytesDesc = prometheus.NewDesc("strata_consumergroup_retention_margin_bytes",
		"Bytes that may still be produced to the partition before retention.bytes deletes the record at the group's committed offset. Absent without retention.bytes.",
		groupLabels, nil)
	groupSkippedDesc = prometheus.NewDesc("strata_consumergroup_skipped_records_total",
		"Records a group skipped because retention deleted them before it read them (its commit moved from below the log start to past it).",
		groupLabels, nil)
)

// lagCollector maps the lag monitor's series to Prometheus.
type lagCollector struct{ src lagMetricsSource }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{groupLagDesc, groupLagSecondsDesc, groupMarginSecondsDesc, groupMarginBytesDesc, groupSkippedDesc} {
		ch <- d
	}
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.ConsumerGroupLag() {
		labels := []string{s.Group, s.Topic, strconv.Itoa(int(s.Partition))}
		ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(s.Records), labels...)
		ch <- prometheus.MustNewConstMetric(groupLagSecondsDesc, prometheus.GaugeValue, s.Seconds, labels...)
		if !s.Margin.Limited {
			continue
		}
		ch <- prometheus.MustNewConstMetric(groupMarginSecondsDesc, prometheus.GaugeValue, s.Margin.Seconds, labels...)
		if s.Margin.Bytes != math.MaxInt64 {
			ch <- prometheus.MustNewConstMetric(groupMarginBytesDesc, prometheus.GaugeValue, float64(s.Margin.Bytes), labels...)
		}
	}
	for _, s := range c.src.SkippedRecords() {
		ch <- prometheus.MustNewConstMetric(groupSkippedDesc, prometheus.CounterValue, float64(s.Records),
			s.Group, s.Topic, strconv.Itoa(int(s.Partition)))
	}
}

// serveLagMetrics publishes the consumer-group lag metrics on /metrics.
func (h *httpServer) serveLagMetrics(src lagMetricsSource) {
	if err := h.reg.Register(lagCollector{src: src}); err != nil {
		h.log.Warn("registering consumer group lag metrics", "err", err)
	}
}
