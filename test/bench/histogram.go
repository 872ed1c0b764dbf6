package bench

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// SubBucketBits is P in the bucket layout of the package doc: each power of
// two is split into 2^P buckets, bounding the relative error by 2^-P.
const SubBucketBits = 7

const (
	subBucketCount = 1 << SubBucketBits
	// bucketCount covers every non-negative int64: indexes up to
	// (62-P+1)·2^P + 2^P - 1 for k = 62.
	bucketCount = (64 - SubBucketBits) * subBucketCount
)

// Histogram counts values in log-linear buckets (see the package doc).
// It is not safe for concurrent use: each goroutine records into its own
// histogram and the owner merges them, or callers hold a lock.
type Histogram struct {
	counts   []uint64 // len bucketCount; counts[i] = values that map to bucket i
	total    uint64
	min, max int64 // exact extremes of recorded values; valid when total > 0
	sum      float64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, bucketCount)}
}

// bucketIndex maps v ≥ 0 to its bucket.
func bucketIndex(v int64) int {
	if v < subBucketCount {
		return int(v)
	}
	k := bits.Len64(uint64(v)) - 1 // floor(log2 v), ≥ P
	shift := k - SubBucketBits
	sub := int(v>>shift) - subBucketCount
	return (shift+1)*subBucketCount + sub
}

// bucketRange returns the smallest and largest value that map to bucket i.
func bucketRange(i int) (low, high int64) {
	if i < subBucketCount {
		return int64(i), int64(i)
	}
	shift := i/subBucketCount - 1
	sub := int64(i % subBucketCount)
	low = (subBucketCount + sub) << shift
	return low, low + (int64(1) << shift) - 1
}

// Record adds one value. Negative values count as 0.
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordDuration adds a duration in nanoseconds.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// RecordN adds n occurrences of v.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if h.total == 0 || v > h.max {
		h.max = v
	}
	h.counts[bucketIndex(v)] += n
	h.total += n
	h.sum += float64(v) * float64(n)
}

// RecordCorrected records v and, when v exceeds expectedInterval (> 0), the
// samples v-interval, v-2·interval, ... down to interval that a client
// sending every expectedInterval would have measured while this one waited
// (HdrHistogram's recordValueWithExpectedInterval).
func (h *Histogram) RecordCorrected(v, expectedInterval int64) {
	h.Record(v)
	if expectedInterval <= 0 {
		return
	}
	for missing := v - expectedInterval; missing >= expectedInterval; missing -= expectedInterval {
		h.Record(missing)
	}
}

// Merge adds every count of o into h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.total == 0 || o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() int64 { return h.min }
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact arithmetic mean (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Quantile returns the value below or at which a fraction q (0..1) of the
// recorded values fall: the highest value of the bucket holding the
// ceil(q·count)-th smallest value, clamped to the exact max. 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	q = math.Max(0, math.Min(1, q))
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, high := bucketRange(i)
			return min(high, h.max)
		}
	}
	return h.max
}

// DurationQuantile is Quantile for histograms of nanoseconds.
func (h *Histogram) DurationQuantile(q float64) time.Duration {
	return time.Duration(h.Quantile(q))
}

// String summarises a histogram of nanoseconds in milliseconds.
func (h *Histogram) String() string {
	ms := func(v int64) float64 { return float64(v) / 1e6 }
	return fmt.Sprintf("n=%d p50=%.3fms p99=%.3fms p99.9=%.3fms max=%.3fms",
		h.total, ms(h.Quantile(0.5)), ms(h.Quantile(0.99)), ms(h.Quantile(0.999)), ms(h.max))
}
