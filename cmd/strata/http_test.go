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
