package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/tier"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHealthReadyAndMetrics(t *testing.T) {
	var etcdDown atomic.Bool
	probe := func(context.Context) error {
		if etcdDown.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), probe)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	base := "http://" + h.addr.String()

	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d before ready, want 200 (process is up)", code)
	}
	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Errorf("/readyz = %d before the broker started, want 503", code)
	}
	h.setReady(true)
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d when ready, want 200", code)
	}
	etcdDown.Store(true)
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "etcd") {
		t.Errorf("/readyz = %d %q with etcd down, want 503 naming etcd", code, body)
	}
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, "\nstrata_up 1\n") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, want strata_up 1 and Go collectors; got:\n%.500s", code, body)
	}
	h.setReady(false)
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "\nstrata_up 0\n") {
		t.Errorf("strata_up must drop to 0 when shutdown begins")
	}
}

func TestLineRecord(t *testing.T) {
	r := lineRecord("user-1:{\"a\":1}", ":")
	if string(r.Key) != "user-1" || string(r.Value) != `{"a":1}` {
		t.Errorf("split at first separator: key %q value %q", r.Key, r.Value)
	}
	if r := lineRecord("no separator here", ":"); r.Key != nil || string(r.Value) != "no separator here" {
		t.Errorf("line without separator: key %q value %q", r.Key, r.Value)
	}
	if r := lineRecord("a:b", ""); r.Key != nil || string(r.Value) != "a:b" {
		t.Errorf("no --key-separator: key %q value %q", r.Key, r.Value)
	}
}

func TestTierStatusBeforeBrokerStarts(t *testing.T) {
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if code, _ := get(t, "http://"+h.addr.String()+"/v1/tier/status"); code != http.StatusServiceUnavailable {
		t.Fatalf("tier status before start: %d", code)
	}
	var out strings.Builder
	c := &cli{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	if code := run(context.Background(), c, []string{"tier", "status", "--http", h.addr.String()}); code != 1 ||
		!strings.Contains(out.String(), "503") {
		t.Fatalf("exit %d output %q", code, out.String())
	}
}

func TestColdReaderMetrics(t *testing.T) {
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	var hits atomic.Int64
	hits.Store(7)
	h.serveCold(func() tier.ColdStats {
		return tier.ColdStats{BlockHits: hits.Load(), BlockMisses: 3, SharedGets: 1, Gets: 4, GetBytes: 4096, GetErrors: 2,
			ReadAheadBlocks: 5, CorruptBlocks: 1, IndexHits: 9, IndexMisses: 6, CachedBytes: 8192, QuotaWait: 1500 * time.Millisecond,
			Governor: tier.GovernorStats{Enabled: true, Limit: 4 << 20, RunDelay: 0.75, Throttled: 2 * time.Second}}
	})
	base := "http://" + h.addr.String()
	_, body := get(t, base+"/metrics")
	for _, line := range []string{
		"strata_cold_cache_hits_total 7", "strata_cold_cache_misses_total 3", "strata_cold_shared_gets_total 1",
		"strata_cold_gets_total 4", "strata_cold_get_bytes_total 4096", "strata_cold_get_errors_total 2",
		"strata_cold_read_ahead_blocks_total 5", "strata_cold_corrupt_blocks_total 1",
		"strata_cold_index_cache_hits_total 9", "strata_cold_index_cache_misses_total 6",
		"strata_cold_cache_bytes 8192", "strata_cold_quota_wait_seconds_total 1.5",
		"strata_cold_governor_limit_bytes_per_second 4.194304e+06", "strata_cold_governor_throttled_seconds_total 2",
		"strata_cold_governor_run_delay 0.75",
		"# TYPE strata_cold_cache_hits_total counter", "# TYPE strata_cold_cache_bytes gauge",
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	// Read at scrape time, not at registration.
	hits.Store(11)
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "\nstrata_cold_cache_hits_total 11\n") {
		t.Errorf("cold metrics must be read from the snapshot at each scrape")
	}
}

func TestPrintTierStatusCleanedRanges(t *testing.T) {
	var out strings.Builder
	printBrokerTierStatus(t, &out,
		broker.PartitionTierStatus{Topic: "plain", Partition: 0, LocalEnd: 10},
		broker.PartitionTierStatus{Topic: "keyed", Partition: 1, LocalStart: 500, LocalEnd: 900, Tiered: true, TieredStart: 0, TieredEnd: 600,
			Compacted: true, CleanedLocalEnd: 700, CleanedTieredEnd: 450, DirtyRatio: 0.25, DirtyBytes: 1024},
	)
	text := out.String()
	for _, want := range []string{"tiered [0, 450) local [500, 700)", "25% (1.0 KiB)", "CLEANED"} {
		if !strings.Contains(text, want) {
			t.Errorf("tier status output lacks %q:\n%s", want, text)
		}
	}
	if line := strings.Split(text, "\n")[1]; !strings.Contains(line, "plain") || strings.Contains(line, "local [") {
		t.Errorf("a partition that is not compacted shows cleaned ranges: %q", line)
	}
}

// TestPprofOnlyWhenAsked: /debug/pprof/ is absent unless --pprof turned it on.
func TestPprofOnlyWhenAsked(t *testing.T) {
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	url := "http://" + h.addr.String() + "/debug/pprof/"
	if code, _ := get(t, url); code != http.StatusNotFound {
		t.Fatalf("pprof without --pprof: %d", code)
	}
	h.servePprof()
	if code, body := get(t, url+"goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("pprof with --pprof: %d %.80q", code, body)
	}
}

func TestPrintTierStatusBucketLag(t *testing.T) {
	var out strings.Builder
	printBrokerTierStatus(t, &out,
		broker.PartitionTierStatus{Topic: "led", Partition: 0, Leader: true, RemoteStorage: true, BucketLagMs: 12_400, BucketLagBytes: 4096, UploadMaxLagMs: 60_000},
		broker.PartitionTierStatus{Topic: "followed", Partition: 1},
	)
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "BUCKET-LAG") || !strings.Contains(lines[1], "12s 4.0 KiB (bound 1m)") {
		t.Errorf("leader's bucket lag missing:\n%s", out.String())
	}
	if strings.Contains(lines[2], "bound") {
		t.Errorf("a follower cannot know the bucket lag: %q", lines[2])
	}
}

// printBrokerTierStatus prints one broker's rows as --broker-only does.
func printBrokerTierStatus(t *testing.T, w io.Writer, status ...broker.PartitionTierStatus) {
	t.Helper()
	rows := make([]tierRow, len(status))
	for i, st := range status {
		rows[i] = tierRow{nodeTierStatus: nodeTierStatus{Node: -1, PartitionTierStatus: st}}
	}
	if err := printTierStatus(w, viewBroker, rows); err != nil {
		t.Fatal(err)
	}
}
