package tier

import (
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

func testGovernorConfig() GovernorConfig {
	return GovernorConfig{Target: 0.6, Floor: 4 * mib, Step: 8 * mib, Ceiling: 64 * mib}.withDefaults()
}

// The control law, one interval at a time.
func TestGovernorLaw(t *testing.T) {
	over, calm := 0.95, 0.45
	steps := []struct {
		name string
		in   governorInput
		want float64 // the limit after the step; 0 unlimited
	}{
		{"an idle machine is never throttled", governorInput{runDelay: calm, hot: true, coldRate: 100 * mib}, 0},
		{"a busy CPU without hot traffic is not throttled", governorInput{runDelay: over, coldRate: 100 * mib}, 0},
		{"hot traffic suffers while the cold path is idle: not its fault", governorInput{runDelay: over, hot: true}, 0},
		{"hot traffic suffers: half the observed cold rate", governorInput{runDelay: over, hot: true, coldRate: 40 * mib}, 20 * mib},
		{"still suffering: halved again", governorInput{runDelay: over, hot: true, coldRate: 20 * mib}, 10 * mib},
		{"halved again", governorInput{runDelay: over, hot: true, coldRate: 10 * mib}, 5 * mib},
		{"never below the floor", governorInput{runDelay: over, hot: true, coldRate: 5 * mib}, 4 * mib},
		{"calm: one step up", governorInput{runDelay: calm, hot: true, coldRate: 4 * mib}, 12 * mib},
		{"calm: another step", governorInput{runDelay: calm, hot: true, coldRate: 12 * mib}, 20 * mib},
		{"hot traffic stops: lifted at once", governorInput{runDelay: over, coldRate: 20 * mib}, 0},
		{"suffering again", governorInput{runDelay: over, hot: true, coldRate: 100 * mib}, 50 * mib},
		{"calm", governorInput{runDelay: calm, hot: true, coldRate: 50 * mib}, 58 * mib},
		{"past the ceiling: lifted", governorInput{runDelay: calm, hot: true, coldRate: 58 * mib}, 0},
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
	g := newGovernor(testGovernorConfig(), nil, 8*mib, clock.Now)
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

// tick turns the cumulative totals into rates for the law: the cold GET
// rate, the run-queue wait per second, and whether anything hot ran.
func TestGovernorTickFeedsTheLaw(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	g := newGovernor(testGovernorConfig(), nil, 8*mib, clock.Now)
	step := func(getBytes, delayedNs int64, hot bool) GovernorStats {
		if hot {
			g.noteHot()
		}
		clock.now = clock.now.Add(time.Second)
		g.tick(clock.now, getBytes, delayedNs)
		return g.stats()
	}
	// 40 MiB of GETs and 0.9 s of run-queue wait in one second, hot: halve.
	if st := step(40*mib, 900e6, true); st.Limit != 20*mib || st.RunDelay != 0.9 {
		t.Fatalf("over target: %+v", st)
	}
	// A wait total that went down (threads exited) counts as none: calm.
	if st := step(60*mib, 100e6, true); st.Limit != 28*mib || st.RunDelay != 0 {
		t.Fatalf("calm: %+v", st)
	}
	if st := step(80*mib, 2e9, false); st.Limit != 0 {
		t.Fatalf("limit %d with no hot request", st.Limit)
	}
}

func TestParseRunDelay(t *testing.T) {
	for line, want := range map[string]int64{
		"841654 12345 1\n": 12345, "": 0, "1": 0, "1 x 2": 0, "1 -5 2": 0,
	} {
		if got := parseRunDelay(line); got != want {
			t.Errorf("parseRunDelay(%q) = %d, want %d", line, got, want)
		}
	}
}

// The sampler sees this process's threads wait when other processes keep
// every core busy.
func TestRunDelaySamplerSeesContention(t *testing.T) {
	s, ok := newRunDelaySampler()
	if !ok {
		t.Fatal("no /proc/self/task/*/schedstat on this Linux machine")
	}
	for range 2 * runtime.NumCPU() {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hog.Process.Kill(); hog.Wait() })
	}
	before, _ := s.total()
	done := make(chan struct{})
	var spinning sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		spinning.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	close(done)
	spinning.Wait()
	if after, _ := s.total(); after <= before {
		t.Fatalf("run-queue wait %d ns before, %d after spinning beside CPU hogs", before, after)
	}
}
