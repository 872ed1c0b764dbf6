package tier

import (
	"math"
	"testing"
	"time"
)

const mib = 1 << 20

func testGovernorConfig() GovernorConfig {
	return GovernorConfig{Target: 2 * time.Millisecond, Floor: 4 * mib, Step: 8 * mib, Ceiling: 64 * mib}.withDefaults()
}

// The control law, one interval at a time.
func TestGovernorLaw(t *testing.T) {
	over, calm := 10*time.Millisecond, 500*time.Microsecond
	steps := []struct {
		name string
		in   governorInput
		want float64 // the limit after the step; 0 unlimited
	}{
		{"an idle machine is never throttled", governorInput{schedP99: calm, hot: true, coldRate: 100 * mib}, 0},
		{"a busy CPU without hot traffic is not throttled", governorInput{schedP99: over, coldRate: 100 * mib}, 0},
		{"hot traffic suffers while the cold path is idle: not its fault", governorInput{schedP99: over, hot: true}, 0},
		{"hot traffic suffers: half the observed cold rate", governorInput{schedP99: over, hot: true, coldRate: 40 * mib}, 20 * mib},
		{"still suffering: halved again", governorInput{schedP99: over, hot: true, coldRate: 20 * mib}, 10 * mib},
		{"halved again", governorInput{schedP99: over, hot: true, coldRate: 10 * mib}, 5 * mib},
		{"never below the floor", governorInput{schedP99: over, hot: true, coldRate: 5 * mib}, 4 * mib},
		{"calm: one step up", governorInput{schedP99: calm, hot: true, coldRate: 4 * mib}, 12 * mib},
		{"calm: another step", governorInput{schedP99: calm, hot: true, coldRate: 12 * mib}, 20 * mib},
		{"hot traffic stops: lifted at once", governorInput{schedP99: over, coldRate: 20 * mib}, 0},
		{"suffering again", governorInput{schedP99: over, hot: true, coldRate: 100 * mib}, 50 * mib},
		{"calm", governorInput{schedP99: calm, hot: true, coldRate: 50 * mib}, 58 * mib},
		{"past the ceiling: lifted", governorInput{schedP99: calm, hot: true, coldRate: 58 * mib}, 0},
	}
	law := governorLaw{cfg: testGovernorConfig()}
	for _, s := range steps {
		law.step(s.in)
		if law.limit != s.want {
			t.Fatalf("%s: limit %.1f MiB/s, want %.1f", s.name, law.limit/mib, s.want/mib)
		}
	}
}

// The governor meters GETs only while it has a limit, and counts the wait.
func TestGovernorDelaysOnlyUnderALimit(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	g := newGovernor(testGovernorConfig(), 8*mib, clock.Now)
	if d := g.delay(64 * mib); d != 0 {
		t.Fatalf("unlimited governor delayed %v", d)
	}
	g.law.limit = 16 * mib // as if a step set it
	g.limit.Store(16 * mib)
	g.bucket.setRate(16 * mib)
	g.delay(8 * mib) // the burst: one block
	if d := g.delay(8 * mib); d != 500*time.Millisecond {
		t.Fatalf("second block delayed %v, want 500ms at 16 MiB/s", d)
	}
	if st := g.stats(); st.Limit != 16*mib || st.Throttled != 500*time.Millisecond || !st.Enabled {
		t.Fatalf("stats %+v", st)
	}
}

// tick measures the cold rate from the GET byte counter and hands the law
// whether anything hot ran.
func TestGovernorTickFeedsTheLaw(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	g := newGovernor(testGovernorConfig(), 8*mib, clock.Now)
	g.law.limit = 32 * mib
	clock.now = clock.now.Add(time.Second)
	g.tick(clock.now, 32*mib) // nothing hot ran: lifted
	if st := g.stats(); st.Limit != 0 {
		t.Fatalf("limit %d with no hot request", st.Limit)
	}
}

func TestHistogramQuantile(t *testing.T) {
	buckets := []float64{0, 0.001, 0.002, 0.004, math.Inf(1)}
	for _, c := range []struct {
		counts []uint64
		want   time.Duration
	}{
		{[]uint64{0, 0, 0, 0}, 0},
		{[]uint64{100, 0, 0, 0}, time.Millisecond},
		{[]uint64{98, 1, 1, 0}, 2 * time.Millisecond},  // the 99th of 100 lies in [1ms, 2ms)
		{[]uint64{97, 1, 2, 0}, 4 * time.Millisecond},  // the 99th of 100 lies in [2ms, 4ms)
		{[]uint64{90, 0, 0, 10}, 4 * time.Millisecond}, // the open top bucket reports its lower bound
	} {
		var total uint64
		for _, n := range c.counts {
			total += n
		}
		if got := histogramQuantile(c.counts, buckets, total, 0.99); got != c.want {
			t.Errorf("counts %v: p99 %v, want %v", c.counts, got, c.want)
		}
	}
}

// The sampler reads the runtime's histogram: a busy interval shows.
func TestSchedSamplerReadsTheRuntime(t *testing.T) {
	s := newSchedSampler()
	if s.sample[0].Value.Kind() == 0 {
		t.Fatal("runtime/metrics has no " + schedLatencyMetric)
	}
	done := make(chan struct{})
	for range 8 {
		go func() {
			for {
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(done)
	if p := s.p99(); p <= 0 {
		t.Fatalf("p99 %v after an interval of more runnable goroutines than cores", p)
	}
}
