package testkit

import (
	"testing"
	"time"
)

// Poll intervals of WaitFor: a fast condition is seen within a millisecond
// or two, and a slow one (a network round trip, a broker's metadata) is not
// hammered more than every maxPoll.
const (
	minPoll = time.Millisecond
	maxPoll = 50 * time.Millisecond
)

// slowWait is the wait after which WaitFor logs how long it took, so that a
// test creeping towards its bound shows up in -v output before it fails.
const slowWait = time.Second

// WaitFor polls cond until it holds, failing t if timeout passes first.
// what names the condition in the failure message.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	poll := minPoll
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
	if waited := time.Since(start); waited > slowWait {
		t.Logf("waited %v for %s", waited.Round(time.Millisecond), what)
	}
}
