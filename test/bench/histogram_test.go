package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// maxRelErr is the documented bound on a reported value's relative error.
const maxRelErr = 1.0 / subBucketCount

func TestBucketLayoutIsContiguousAndCoversValues(t *testing.T) {
	// Every bucket's range starts right after the previous one's, so each
	// value maps to exactly one bucket and no value is lost.
	prevHigh := int64(-1)
	for i := 0; i < bucketCount; i++ {
		low, high := bucketRange(i)
		if low != prevHigh+1 || high < low {
			t.Fatalf("bucket %d = [%d,%d], previous ended at %d", i, low, high, prevHigh)
		}
		if got := bucketIndex(low); got != i {
			t.Fatalf("bucketIndex(%d) = %d, want %d", low, got, i)
		}
		if got := bucketIndex(high); got != i {
			t.Fatalf("bucketIndex(%d) = %d, want %d", high, got, i)
		}
		if high > low && float64(high-low+1)/float64(low) > maxRelErr+1e-12 {
			t.Fatalf("bucket %d = [%d,%d] wider than the error bound", i, low, high)
		}
		prevHigh = high
	}
	if prevHigh != math.MaxInt64 {
		t.Fatalf("buckets end at %d, want MaxInt64", prevHigh)
	}
}

// exactQuantile is the ceil(q·n)-th smallest of sorted values.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func checkQuantiles(t *testing.T, h *Histogram, values []int64) {
	t.Helper()
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		want := exactQuantile(sorted, q)
		got := h.Quantile(q)
		if got < want || float64(got-want) > float64(want)*maxRelErr {
			t.Errorf("q=%v: got %d, exact %d (bound %.2f%%)", q, got, want, maxRelErr*100)
		}
	}
	if h.Min() != sorted[0] || h.Max() != sorted[len(sorted)-1] {
		t.Errorf("min/max = %d/%d, want %d/%d", h.Min(), h.Max(), sorted[0], sorted[len(sorted)-1])
	}
	if h.Count() != uint64(len(values)) {
		t.Errorf("count = %d, want %d", h.Count(), len(values))
	}
}

func TestQuantilesOfKnownDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := map[string]func(i int) int64{
		"uniform 1..1e6":        func(i int) int64 { return int64(i%1_000_000) + 1 },
		"small exact":           func(i int) int64 { return int64(i % 100) },
		"exponential ms":        func(int) int64 { return int64(rng.ExpFloat64() * 2e6) },
		"bimodal 1ms/200ms":     func(i int) int64 { return map[bool]int64{true: 200e6, false: 1e6}[i%100 == 0] },
		"pareto heavy tail":     func(int) int64 { return int64(1e5 / math.Pow(rng.Float64()+1e-9, 1/1.5)) },
		"huge values near 2^62": func(i int) int64 { return 1<<62 + int64(i)*1e12 },
	}
	for name, g := range gen {
		t.Run(name, func(t *testing.T) {
			h := NewHistogram()
			values := make([]int64, 200_000)
			for i := range values {
				values[i] = g(i)
				h.Record(values[i])
			}
			checkQuantiles(t, h, values)
		})
	}
}

func TestUniformMedianAndTail(t *testing.T) {
	h := NewHistogram()
	for v := int64(1); v <= 1000; v++ {
		h.Record(v * 1000) // 1µs..1ms in ns
	}
	for q, want := range map[float64]int64{0.5: 500_000, 0.99: 990_000, 0.999: 999_000} {
		got := h.Quantile(q)
		if got < want || float64(got-want) > float64(want)*maxRelErr {
			t.Errorf("q=%v = %d, want ≈%d", q, got, want)
		}
	}
	if mean := h.Mean(); mean != 500_500 {
		t.Errorf("mean = %v, want 500500", mean)
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	var values []int64
	for i := 0; i < 50_000; i++ {
		v := int64(rng.ExpFloat64() * 1e6)
		if i%3 == 0 {
			v *= 1000 // b gets a different, heavier distribution
			b.Record(v)
		} else {
			a.Record(v)
		}
		all.Record(v)
		values = append(values, v)
	}
	merged := NewHistogram()
	merged.Merge(a)
	merged.Merge(NewHistogram()) // merging an empty histogram changes nothing
	merged.Merge(b)
	if !slices.Equal(merged.counts, all.counts) || merged.Count() != all.Count() ||
		merged.Min() != all.Min() || merged.Max() != all.Max() {
		t.Fatal("merged histogram differs from one that recorded every value")
	}
	checkQuantiles(t, merged, values)
}

func TestEmptyAndNegative(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(0.99) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Fatal("empty histogram must report zeros")
	}
	h.Record(-5)
	if h.Quantile(1) != 0 || h.Min() != 0 {
		t.Fatalf("negative value must count as 0, got q1=%d min=%d", h.Quantile(1), h.Min())
	}
}

func TestRecordCorrectedBackfillsStall(t *testing.T) {
	// One 100ms stall in a stream expecting a sample every 10ms: a client
	// sending on schedule would have seen 90, 80, ..., 10 ms as well.
	h := NewHistogram()
	for i := 0; i < 90; i++ {
		h.RecordCorrected(1e6, 10e6) // 1ms, below the interval: no back-fill
	}
	h.RecordCorrected(100e6, 10e6)
	if h.Count() != 100 {
		t.Fatalf("count = %d, want 90 + 1 + 9 back-filled", h.Count())
	}
	if p95 := h.Quantile(0.95); p95 < 50e6 {
		t.Fatalf("p95 = %d, want the stall to dominate the tail (≥50ms)", p95)
	}
	plain := NewHistogram()
	for i := 0; i < 90; i++ {
		plain.Record(1e6)
	}
	plain.Record(100e6)
	if p95 := plain.Quantile(0.95); p95 > 2e6 {
		t.Fatalf("uncorrected p95 = %d, expected the omission to hide the stall", p95)
	}
}
