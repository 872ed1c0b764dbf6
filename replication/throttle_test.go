package replication

import "testing"

// Over ten seconds a greedy mover that takes 64 KiB per allowed fetch gets
// about the rate, not more than one second's burst above it.
func TestMoveThrottle(t *testing.T) {
	var th MoveThrottle
	if ok, limit := th.Allow(0); !ok || limit != 0 {
		t.Fatal("unlimited throttle refused or limited")
	}
	const rate = 1 << 20
	th.SetRate(rate, 0)
	served := 0
	for now := int64(0); now < 10_000; now += 10 {
		if ok, limit := th.Allow(now); ok {
			n := min(64<<10, limit)
			th.Charge(n, now)
			served += n
		}
	}
	if served < 9*rate || served > 11*rate {
		t.Fatalf("served %d bytes in 10 s at %d B/s", served, rate)
	}
	th.SetRate(0, 10_000)
	if ok, _ := th.Allow(10_000); !ok || th.Rate() != 0 {
		t.Fatal("a rate set back to 0 still throttles")
	}
}
