package main

import (
	"math"
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
