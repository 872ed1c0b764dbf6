package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestHumanUnits(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 5 << 30: "5.0 GiB", -2048: "-2.0 KiB", 3 << 40: "3.0 TiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:       "850ms",
		42 * time.Second:             "42s",
		200 * time.Second:            "3m20s",
		10 * time.Minute:             "10m",
		5*time.Hour + 12*time.Minute: "5h12m",
		3 * time.Hour:                "3h",
		76 * time.Hour:               "3d4h",
		math.MaxInt64:                "∞",
		-90 * time.Second:            "-1m30s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRenderProgress(t *testing.T) {
	for _, c := range []struct {
		done, total, bytes int64
		elapsed            time.Duration
		want               string
	}{
		{500, 1000, 5 << 20, 10 * time.Second, "500/1000 records  5.0 MiB  512.0 KiB/s  50 records/s  ETA 10s"},
		{10, 0, 2048, 2 * time.Second, "10 records  2.0 KiB  1.0 KiB/s  5 records/s"},
		{1000, 1000, 1 << 30, time.Minute, "1000/1000 records  1.0 GiB  17.1 MiB/s  17 records/s"},
	} {
		if got := renderProgress(c.done, c.total, c.bytes, c.elapsed); got != c.want {
			t.Errorf("renderProgress(%d, %d, %d, %v) = %q, want %q", c.done, c.total, c.bytes, c.elapsed, got, c.want)
		}
	}
	// In a pipe (not a terminal) nothing is drawn.
	var buf strings.Builder
	stop := newProgressLine(&buf).watch(func() (int64, int64, int64) { return 1, 2, 3 })
	time.Sleep(2 * progressEvery)
	stop()
	if buf.Len() != 0 {
		t.Fatalf("progress drawn into a pipe: %q", buf.String())
	}
}
