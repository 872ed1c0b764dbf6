package e2e

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// /metrics acceptance: the real binary's scrape parses with the
// Prometheus text parser, and the Kafka-like series move with traffic.

// scrapeFamilies GETs b's /metrics and parses the whole answer.
func scrapeFamilies(t testing.TB, b *Broker) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return families
}

// seriesValue sums the samples of family name whose labels include labels
// (a histogram counts its samples); ok is false when none matched.
func seriesValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) (sum float64, ok bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, ok
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, l := range m.GetLabel() {
			found = found || (l.GetName() == k && l.GetValue() == v)
		}
		if !found {
			return false
		}
	}
	return true
}

// metricCheck is one series and what its value must satisfy.
type metricCheck struct {
	name   string
	labels map[string]string
	ok     func(float64) bool
	want   string
}

func positive(v float64) bool { return v > 0 }
func zero(v float64) bool     { return v == 0 }

func checkSeries(t testing.TB, families map[string]*dto.MetricFamily, checks []metricCheck) {
	t.Helper()
	for _, c := range checks {
		v, ok := seriesValue(families, c.name, c.labels)
		if !ok {
			t.Errorf("no series %s%v on /metrics", c.name, c.labels)
		} else if !c.ok(v) {
			t.Errorf("%s%v = %v, want %s", c.name, c.labels, v, c.want)
		}
	}
}

// TestMetricsMoveWithTraffic: produce and consume on a topic, then every
// broker series is on /metrics with the traffic in it.
func TestMetricsMoveWithTraffic(t *testing.T) {
	b := StartBroker(t)
	const topic = "metrics"
	createTopic(t, b.Admin(), topic, 2, nil)
	before := scrapeFamilies(t, b)
	if v, _ := seriesValue(before, "strata_topic_bytes_in_total", map[string]string{"topic": topic}); v != 0 {
		t.Fatalf("bytes in %v before any produce", v)
	}

	// Uncompressed, so the bytes counted are at least the values' bytes.
	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var records []*kgo.Record
	for i := range 200 {
		records = append(records, &kgo.Record{Partition: int32(i % 2), Value: make([]byte, 100)})
	}
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()
	consumer := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	ctx := testCtx(t, 30*time.Second)
	for read := 0; read < len(records); {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", read, err)
		}
		read += fetches.NumRecords()
	}

	f := scrapeFamilies(t, b)
	part0 := map[string]string{"topic": topic, "partition": "0"}
	checkSeries(t, f, []metricCheck{
		{"strata_request_total", map[string]string{"api": "Produce"}, positive, "> 0"},
		{"strata_request_total", map[string]string{"api": "Fetch"}, positive, "> 0"},
		{"strata_request_total", map[string]string{"api": "Metadata"}, positive, "> 0"},
		{"strata_request_duration_seconds", map[string]string{"api": "Produce"}, positive, "> 0 samples"},
		{"strata_request_duration_seconds", map[string]string{"api": "Fetch"}, positive, "> 0 samples"},
		{"strata_request_errors_total", map[string]string{"api": "Produce"}, zero, "0"},
		{"strata_topic_bytes_in_total", map[string]string{"topic": topic}, func(v float64) bool { return v >= 200*100 }, ">= the values produced"},
		{"strata_topic_bytes_out_total", map[string]string{"topic": topic}, func(v float64) bool { return v >= 200*100 }, ">= the values consumed"},
		{"strata_under_replicated_partitions", nil, zero, "0 on one broker"},
		{"strata_partition_under_replicated", part0, zero, "0"},
		{"strata_partition_isr_size", part0, func(v float64) bool { return v == 1 }, "1"},
		{"strata_isr_shrinks_total", nil, zero, "0"},
		{"strata_isr_expands_total", nil, zero, "0"},
		{"strata_log_size_bytes", part0, func(v float64) bool { return v >= 100*100 }, ">= partition 0's values"},
		{"strata_log_end_offset", part0, func(v float64) bool { return v == 100 }, "100"},
		{"strata_leader_partitions", nil, positive, "> 0"},
	})
	// The histogram's buckets are cumulative and end at the sample count.
	for _, m := range f["strata_request_duration_seconds"].GetMetric() {
		h := m.GetHistogram()
		var last uint64
		for _, bucket := range h.GetBucket() {
			if bucket.GetCumulativeCount() < last {
				t.Fatalf("histogram buckets not cumulative: %v", h)
			}
			last = bucket.GetCumulativeCount()
		}
		if last != h.GetSampleCount() {
			t.Fatalf("histogram +Inf bucket %d, count %d", last, h.GetSampleCount())
		}
	}
}

// TestMetricsTieredSeries: with a bucket, the upload lag, object-store
// requests by operation and topic, the tiered log size and the cold
// reader's counters are on /metrics and move when segments tier and a
// consumer reads them back.
func TestMetricsTieredSeries(t *testing.T) {
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m)
	const topic = "metrics-tiered"
	createTopic(t, b.Admin(), topic, 1, map[string]string{
		"internal.segment.bytes": "1048576", "local.retention.bytes": "1048576", "retention.ms": "-1"})
	tp := newTierProducer(b, topic, 1)
	tp.produce(t, testCtx(t, 2*time.Minute), 4<<20)
	testkit.WaitFor(t, 60*time.Second, "local segments freed after upload", func() bool {
		return fetchTierStatus(t, b, topic)[0].LocalStart > 0
	})
	consumeColdFromZero(t, b, topic, tp)

	f := scrapeFamilies(t, b)
	part0 := map[string]string{"topic": topic, "partition": "0"}
	checkSeries(t, f, []metricCheck{
		{"strata_object_store_requests_total", map[string]string{"topic": topic}, positive, "> 0"},
		{"strata_tier_uploaded_bytes_total", nil, positive, "> 0"},
		{"strata_tier_upload_lag_bytes", part0, func(v float64) bool { return v >= 0 }, ">= 0"},
		{"strata_tiered_log_size_bytes", part0, positive, "> 0"},
		{"strata_log_start_offset", part0, zero, "0 (the bucket holds the start)"},
		{"strata_cold_gets_total", nil, positive, "> 0 after reading tiered offsets"},
		{"strata_cold_cache_misses_total", nil, positive, "> 0"},
		{"strata_topic_bytes_out_total", map[string]string{"topic": topic}, func(v float64) bool { return v >= 4<<20 }, ">= the bytes produced"},
	})
}
