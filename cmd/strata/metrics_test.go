package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/strata-log/strata/broker"
)

// fakeBrokerMetrics is a fixed brokerMetricsSource.
type fakeBrokerMetrics struct {
	requests   []broker.APIMetrics
	topics     []broker.TopicBytes
	partitions []broker.PartitionMetrics
	conns      broker.ConnStats
	replicas   broker.ReplicaStats
}

func (f fakeBrokerMetrics) RequestMetrics() []broker.APIMetrics         { return f.requests }
func (f fakeBrokerMetrics) TopicBytes() []broker.TopicBytes             { return f.topics }
func (f fakeBrokerMetrics) PartitionMetrics() []broker.PartitionMetrics { return f.partitions }
func (f fakeBrokerMetrics) ConnStats() broker.ConnStats                 { return f.conns }
func (f fakeBrokerMetrics) ReplicaStats() broker.ReplicaStats           { return f.replicas }

// scrapeMetrics GETs /metrics and parses it with the Prometheus text parser.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return families
}

// sample returns the metric of family name whose labels include labels.
func sample(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	f := families[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return nil
}

func TestBrokerMetricsCollector(t *testing.T) {
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	buckets := make([]uint64, len(broker.RequestLatencyBuckets()))
	for i := range buckets {
		buckets[i] = uint64(min(i, 4)) // cumulative: 4 requests within the 5th bound
	}
	h.serveBrokerMetrics(fakeBrokerMetrics{
		conns:    broker.ConnStats{Open: 4, RefusedPerIP: 2},
		replicas: broker.ReplicaStats{MissedProgress: 3},
		requests: []broker.APIMetrics{{APIKey: 0, Name: "Produce", Count: 5, Errors: 1, Buckets: buckets, SumSeconds: 12.5}},
		topics:   []broker.TopicBytes{{Topic: "t", BytesIn: 100, BytesOut: 40, ReplicationBytesOut: 7}},
		partitions: []broker.PartitionMetrics{
			{Topic: "t", Partition: 0, Leader: true, UnderReplicated: true, Replicas: 3, ISRSize: 2, ISRShrinks: 2, ISRExpands: 1, LogSizeBytes: 4096, LogEndOffset: 10},
			{Topic: "t", Partition: 1, Leader: true, Replicas: 3, ISRSize: 3, ISRShrinks: 1, LogSizeBytes: 10},
			{Topic: "t", Partition: 2, Leader: false, LogSizeBytes: 20, TieredSizeBytes: 30},
		},
	})
	f := scrapeMetrics(t, h.addr.String())
	gauges := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"strata_request_total", map[string]string{"api": "Produce"}, 5},
		{"strata_request_errors_total", map[string]string{"api": "Produce"}, 1},
		{"strata_topic_bytes_in_total", map[string]string{"topic": "t"}, 100},
		{"strata_topic_bytes_out_total", map[string]string{"topic": "t"}, 40},
		{"strata_topic_replication_bytes_out_total", map[string]string{"topic": "t"}, 7},
		{"strata_under_replicated_partitions", nil, 1},
		{"strata_leader_partitions", nil, 2},
		{"strata_partitions", nil, 3},
		{"strata_isr_shrinks_total", nil, 3},
		{"strata_isr_expands_total", nil, 1},
		{"strata_partition_under_replicated", map[string]string{"topic": "t", "partition": "0"}, 1},
		{"strata_partition_under_replicated", map[string]string{"topic": "t", "partition": "2"}, 0},
		{"strata_partition_isr_size", map[string]string{"topic": "t", "partition": "0"}, 2},
		{"strata_log_size_bytes", map[string]string{"topic": "t", "partition": "0"}, 4096},
		{"strata_tiered_log_size_bytes", map[string]string{"topic": "t", "partition": "2"}, 30},
		{"strata_log_end_offset", map[string]string{"topic": "t", "partition": "0"}, 10},
		{"strata_connections", nil, 4},
		{"strata_replica_missed_progress_total", nil, 3},
		{"strata_connections_refused_total", map[string]string{"limit": "per_ip"}, 2},
	}
	for _, g := range gauges {
		m := sample(t, f, g.name, g.labels)
		got := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		if got != g.want {
			t.Errorf("%s%v = %v, want %v", g.name, g.labels, got, g.want)
		}
	}
	hist := sample(t, f, "strata_request_duration_seconds", map[string]string{"api": "Produce"}).GetHistogram()
	// The text format adds the +Inf bucket (the sample count).
	got := hist.GetBucket()
	if hist.GetSampleCount() != 5 || hist.GetSampleSum() != 12.5 || len(got) != len(buckets)+1 ||
		!math.IsInf(got[len(buckets)].GetUpperBound(), 1) || got[len(buckets)].GetCumulativeCount() != 5 {
		t.Fatalf("histogram %v", hist)
	}
	for i, b := range got[:len(buckets)] {
		if b.GetUpperBound() != broker.RequestLatencyBuckets()[i] || b.GetCumulativeCount() != buckets[i] {
			t.Errorf("bucket %d: le=%v count %d, want le=%v count %d", i, b.GetUpperBound(), b.GetCumulativeCount(),
				broker.RequestLatencyBuckets()[i], buckets[i])
		}
	}
	if _, ok := f["strata_partition_isr_size"]; ok && len(f["strata_partition_isr_size"].GetMetric()) != 2 {
		t.Errorf("ISR size reported for a follower's partition: %v", f["strata_partition_isr_size"])
	}
}
