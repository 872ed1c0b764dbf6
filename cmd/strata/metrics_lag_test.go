package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/lag"
)

type fakeLagMetrics struct {
	series  []lag.Series
	skipped []group.Skipped
}

func (f fakeLagMetrics) ConsumerGroupLag() []lag.Series  { return f.series }
func (f fakeLagMetrics) SkippedRecords() []group.Skipped { return f.skipped }

func TestLagMetricsCollector(t *testing.T) {
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	h.serveLagMetrics(fakeLagMetrics{
		series: []lag.Series{
			{Group: "g", Topic: "t", Partition: 0, Records: 25, Seconds: 90, Margin: lag.Margin{Limited: true, Seconds: 600, Bytes: 4096}},
			{Group: "g", Topic: "t", Partition: 1, Records: 3, Margin: lag.Margin{Limited: true, Seconds: 1200, Bytes: math.MaxInt64}},
			{Group: "c", Topic: "compacted", Partition: 0, Records: 1, Margin: lag.Margin{Seconds: math.Inf(1), Bytes: math.MaxInt64}},
		},
		skipped: []group.Skipped{{Group: "g", TopicPartition: group.TopicPartition{Topic: "t", Partition: 0}, Records: 10}},
	})
	f := scrapeMetrics(t, h.addr.String())
	p0 := map[string]string{"group": "g", "topic": "t", "partition": "0"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"strata_consumergroup_lag", p0, 25},
		{"strata_consumergroup_lag_seconds", p0, 90},
		{"strata_consumergroup_retention_margin_seconds", p0, 600},
		{"strata_consumergroup_retention_margin_bytes", p0, 4096},
		{"strata_consumergroup_retention_margin_seconds", map[string]string{"partition": "1"}, 1200},
		{"strata_consumergroup_lag", map[string]string{"group": "c"}, 1},
	} {
		m := sample(t, f, c.name, c.labels)
		if got := m.GetGauge().GetValue(); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := sample(t, f, "strata_consumergroup_skipped_records_total", p0).GetCounter().GetValue(); got != 10 {
		t.Errorf("skipped records %v, want 10", got)
	}
	// No margin where no retention limit applies, no byte margin without retention.bytes.
	if n := len(f["strata_consumergroup_retention_margin_seconds"].GetMetric()); n != 2 {
		t.Errorf("%d margin series, want 2 (not the compacted topic's)", n)
	}
	if n := len(f["strata_consumergroup_retention_margin_bytes"].GetMetric()); n != 1 {
		t.Errorf("%d byte-margin series, want 1", n)
	}
}
