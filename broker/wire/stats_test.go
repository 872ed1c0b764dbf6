package wire

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetricsObserveRequestBuckets(t *testing.T) {
	var stats RequestStats
	stats.Observe(0, 30*time.Millisecond, false) // in (0.025, 0.05]
	stats.Observe(0, 50*time.Millisecond, true)  // exactly 0.05: le is inclusive
	stats.Observe(0, time.Minute, false)         // +Inf only
	stats.Observe(-1, time.Second, false)        // ignored
	stats.Observe(kmsg.MaxKey+1, time.Second, false)
	got := stats.Snapshot()
	if len(got) != 1 {
		t.Fatalf("metrics for %d keys, want 1: %+v", len(got), got)
	}
	m := got[0]
	bounds := RequestLatencyBuckets()
	for i, bound := range bounds {
		want := uint64(0)
		switch {
		case bound >= 0.05:
			want = 2
		}
		if m.Buckets[i] != want {
			t.Errorf("bucket le=%v: %d, want %d", bound, m.Buckets[i], want)
		}
	}
	if m.Name != "Produce" || m.Count != 3 || m.Errors != 1 {
		t.Errorf("got %+v, want Produce with count 3, 1 error", m)
	}
	if want := (30*time.Millisecond + 50*time.Millisecond + time.Minute).Seconds(); m.SumSeconds != want {
		t.Errorf("sum %v, want %v", m.SumSeconds, want)
	}
}
