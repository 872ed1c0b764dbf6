package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

const (
	dashboardPath = "grafana/strata-dashboard.json"
	alertsPath    = "prometheus/alerts.yml"
)

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []selector
	}{
		{`strata_up`, []selector{{name: "strata_up"}}},
		{`sum by (api) (rate(strata_request_total{instance=~"$instance"}[$__rate_interval]))`,
			[]selector{{"strata_request_total", []string{"instance"}}}},
		{`histogram_quantile(0.99, sum by (le, api) (rate(strata_request_duration_seconds_bucket{api="Produce"}[5m]))) > 0.5`,
			[]selector{{"strata_request_duration_seconds_bucket", []string{"api"}}}},
		{`sum(rate(a_total[5m])) / on (instance) group_left (topic) sum without (x) (b) > bool 1 and c offset 1h`,
			[]selector{{name: "a_total"}, {name: "b"}, {name: "c"}}},
		{`max(x{l="a}b\"c", m!~'q'}) unless time() > 1e3`, []selector{{"x", []string{"l", "m"}}}},
		{`label_values(strata_up, instance)`, []selector{{name: "strata_up"}}},
		{`rat(strata_up[5m])`, []selector{{name: "rat"}, {name: "strata_up"}}}, // a misspelt function is caught
		{`time`, []selector{{name: "time"}}},                                   // a metric named like a function
		{`sum(${group}x) + Inf + NaN`, []selector{{name: "x"}}},
	} {
		if got := selectors(tc.expr); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("selectors(%q) = %+v, want %+v", tc.expr, got, tc.want)
		}
	}
}

// TestProblemsFindsUnknownNames proves the check can fail: a bogus metric,
// a bogus label and a counter queried as a histogram are reported.
func TestProblemsFindsUnknownNames(t *testing.T) {
	e := parseExposition(`# HELP strata_request_total x
# TYPE strata_request_total counter
strata_request_total{api="Produce"} 3
# TYPE strata_request_duration_seconds histogram
strata_request_duration_seconds_bucket{api="Produce",le="0.1"} 3
strata_request_duration_seconds_sum{api="Produce"} 0.2
strata_request_duration_seconds_count{api="Produce"} 3
`)
	got := e.problems([]query{
		{"ok", `rate(strata_request_total{api="Fetch", instance="a"}[1m]) + strata_request_duration_seconds_count + up`},
		{"ok", `histogram_quantile(0.9, rate(strata_request_duration_seconds_bucket{le="1"}[1m]))`},
		{"p1", `strata_bogus_total`},
		{"p2", `strata_request_total{topic="t"}`},
		{"p3", `strata_request_total_count`},
	})
	want := []string{
		"p1: metric strata_bogus_total is not exported by the broker",
		`p2: strata_request_total has no label "topic"`,
		"p3: metric strata_request_total_count is not exported by the broker",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAlertQueries(t *testing.T) {
	queries := alertQueries(t, alertsPath)
	if len(queries) < 10 {
		t.Fatalf("%d expressions in %s: extraction broken?", len(queries), alertsPath)
	}
	for _, q := range queries {
		if !strings.HasPrefix(q.where, "alert Strata") || strings.TrimSpace(q.expr) == "" {
			t.Errorf("rule %q: expr %q", q.where, q.expr)
		}
	}
}

// TestMonitoringMetricsExist starts one real broker (embedded etcd, a
// file:// bucket), gives it a tiered topic, a compacted topic and a consumer
// group, then checks that every metric and label the Grafana dashboard and
// the alert rules query is on its /metrics.
func TestMonitoringMetricsExist(t *testing.T) {
	var queries []query
	queries = append(queries, dashboardQueries(t, dashboardPath)...)
	queries = append(queries, alertQueries(t, alertsPath)...)
	b := startMetricsBroker(t)
	b.makeSeries(t)
	// The lag monitor and the uploader run on their own clocks: wait for
	// the last series to appear.
	var text string
	testkit.WaitFor(t, 60*time.Second, "lag, retention margin, bucket and cleaner series", func() bool {
		text = b.scrape(t)
		for _, name := range []string{"strata_consumergroup_lag_seconds", "strata_consumergroup_retention_margin_seconds",
			"strata_object_store_requests_total", "strata_cleaner_dirty_bytes"} {
			if !strings.Contains(text, "\n"+name+"{") {
				return false
			}
		}
		return true
	})
	if problems := parseExposition(text).problems(queries); len(problems) > 0 {
		t.Fatalf("%d queries read what the broker does not export:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	t.Logf("%d queries checked against %d bytes of /metrics", len(queries), len(text))

	// The compose healthcheck's tool against the same broker.
	httpcheck := filepath.Join(t.TempDir(), "httpcheck")
	if out, err := exec.Command("go", "build", "-o", httpcheck, "./httpcheck").CombinedOutput(); err != nil {
		t.Fatalf("build httpcheck: %v\n%s", err, out)
	}
	if out, err := exec.Command(httpcheck, "http://"+b.httpAddr+"/readyz").CombinedOutput(); err != nil {
		t.Errorf("httpcheck /readyz of a ready broker: %v\n%s", err, out)
	}
	if out, err := exec.Command(httpcheck, "http://"+b.httpAddr+"/no-such-path").CombinedOutput(); err == nil {
		t.Errorf("httpcheck of a 404 succeeded:\n%s", out)
	}
}

type metricsBroker struct {
	addr, httpAddr string
	proc           *testkit.Process
	log            string
}

func startMetricsBroker(t *testing.T) *metricsBroker {
	t.Helper()
	dir := t.TempDir()
	b := &metricsBroker{addr: testkit.FreeAddr(t), httpAddr: testkit.FreeAddr(t), log: filepath.Join(dir, "broker.log")}
	proc, err := testkit.StartProcess(testkit.ProcessConfig{
		Bin: testkit.StrataBinary(t),
		Args: []string{"serve", "--node-id", "1", "--data-dir", filepath.Join(dir, "data"),
			"--listen", b.addr, "--advertise", b.addr, "--http", b.httpAddr,
			"--consumer-lag-interval", "500ms", "--tier-upload-interval", "250ms", "--tier-upload-max-lag", "1s",
			"--log-cleaner-backoff", "500ms"},
		Env:     testkit.EnvWithout("STRATA_"),
		LogPath: b.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.proc = proc
	t.Cleanup(func() {
		if err := proc.Stop(60 * time.Second); err != nil {
			t.Errorf("broker stop: %v", err)
		}
		if t.Failed() {
			t.Logf("broker log:\n%s", b.logTail())
		}
	})
	alive := func() error {
		if proc.HasExited() {
			return fmt.Errorf("broker exited: %v", proc.Err())
		}
		return nil
	}
	if err := testkit.WaitHTTP200("http://"+b.httpAddr+"/readyz", 60*time.Second, alive); err != nil {
		t.Fatalf("broker not ready: %v\n%s", err, b.logTail())
	}
	return b
}

func (b *metricsBroker) logTail() string {
	data, _ := exec.Command("tail", "-c", "4000", b.log).Output()
	return string(data)
}

// makeSeries creates what the conditional series need: a topic with
// retention.ms (retention margins) and small segments (uploads, so bucket
// requests), a compacted topic (cleaner series), and a group with a
// committed offset behind the end (lag).
func (b *metricsBroker) makeSeries(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	str := func(s string) *string { return &s }
	const tiered, compacted = "deploy-metrics", "deploy-compacted"
	for topic, configs := range map[string]map[string]*string{
		tiered:    {"retention.ms": str("3600000"), "internal.segment.bytes": str("16384")},
		compacted: {"cleanup.policy": str("compact")},
	} {
		resp, err := adm.CreateTopic(ctx, 1, 1, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	var records []*kgo.Record
	for i := range 100 {
		records = append(records,
			&kgo.Record{Topic: tiered, Value: []byte(strings.Repeat("x", 1024))},
			&kgo.Record{Topic: compacted, Key: []byte{byte(i % 5)}, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	var offsets kadm.Offsets
	offsets.AddOffset(tiered, 0, 10, -1)
	resp, err := adm.CommitOffsets(ctx, "deploy-lag", offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func (b *metricsBroker) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + b.httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %v %s", err, resp.Status)
	}
	return string(body)
}
