package tier

import (
	"math"
	"runtime/metrics"
	"time"
)

// schedLatencyMetric is the Go runtime's histogram of the time goroutines
// spent runnable before running: when every core is busy, it grows for
// every goroutine, the hot path's included.
const schedLatencyMetric = "/sched/latencies:seconds"

// schedSampler turns the runtime's cumulative scheduling-latency histogram
// into per-interval percentiles. Not safe for concurrent use.
type schedSampler struct {
	sample []metrics.Sample
	prev   []uint64 // the counts at the previous p99 call
}

func newSchedSampler() *schedSampler {
	s := &schedSampler{sample: []metrics.Sample{{Name: schedLatencyMetric}}}
	s.p99() // the baseline: the first interval starts now
	return s
}

// p99 is the 99th percentile of the scheduling latencies recorded since
// the previous call (0 when none were).
func (s *schedSampler) p99() time.Duration {
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s.sample[0].Value.Float64Histogram()
	delta := make([]uint64, len(h.Counts))
	var total uint64
	for i, c := range h.Counts {
		if i < len(s.prev) {
			c -= s.prev[i]
		}
		delta[i] = c
		total += c
	}
	s.prev = append(s.prev[:0], h.Counts...)
	return histogramQuantile(delta, h.Buckets, total, 0.99)
}

// histogramQuantile is the upper bound of the bucket holding quantile q of
// counts (bucket i spans [buckets[i], buckets[i+1])); an unbounded top
// bucket reports its lower bound.
func histogramQuantile(counts []uint64, buckets []float64, total uint64, q float64) time.Duration {
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total-1)) + 1
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen < rank {
			continue
		}
		upper := buckets[i+1]
		if math.IsInf(upper, 1) {
			upper = buckets[i]
		}
		return time.Duration(upper * float64(time.Second))
	}
	return 0
}
