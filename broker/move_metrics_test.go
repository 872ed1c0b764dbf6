package broker

import (
	"slices"
	"testing"
	"time"
)

// Move durations land in cumulative buckets with their sum and count.
func TestMoveDurationHistogram(t *testing.T) {
	var h durationHistogram
	if cum, sum, n := h.snapshot(); n != 0 || sum != 0 || len(cum) != len(MoveDurationBuckets()) {
		t.Fatalf("empty: %v %v %v", cum, sum, n)
	}
	for _, d := range []time.Duration{500 * time.Millisecond, 3 * time.Second, 2 * time.Hour, 10 * time.Hour} {
		h.observe(d)
	}
	cum, sum, n := h.snapshot()
	// bounds 1 5 15 60 300 900 3600 14400
	if want := []uint64{1, 2, 2, 2, 2, 2, 2, 3}; !slices.Equal(cum, want) || n != 4 || sum != 0.5+3+7200+36000 {
		t.Fatalf("cumulative %v sum %v count %v, want %v, 43203.5, 4", cum, sum, n, want)
	}
}
