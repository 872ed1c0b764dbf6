package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// TestColdReadClientBudget: with --cold-read-client-bytes-per-second B, a
// consumer backfilling from offset 0 (the bytes below the local log start
// come from the bucket) is served cold bytes at no more than about B (one
// window of burst allowed), and its fetches carry throttle_time_ms.
func TestColdReadClientBudget(t *testing.T) {
	const (
		budget = 1 << 20 // bytes per second
		topic  = "coldbudget"
	)
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m, "--cold-read-client-bytes-per-second", strconv.Itoa(budget))
	createTopic(t, b.Admin(), topic, 1, map[string]string{
		"internal.segment.bytes": "1048576", "local.retention.bytes": "1048576", "retention.ms": "-1"})
	tp := newTierProducer(b, topic, 1)
	tp.produce(t, testCtx(t, 2*time.Minute), 8<<20)
	var localStart int64
	testkit.WaitFor(t, 60*time.Second, "most records only in the bucket", func() bool {
		localStart = fetchTierStatus(t, b, topic)[0].LocalStart
		return localStart > tp.next[0]*2/3
	})

	throttles := &throttleCounter{}
	cl := b.Client(kgo.ClientID("backfill"), kgo.WithHooks(throttles),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t, 3*time.Minute)
	start := time.Now()
	var coldBytes, next int64
	for next < localStart {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("consume at %d: %v", next, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("offset %d, want %d", r.Offset, next)
			}
			checkTierValue(t, r.Partition, r.Offset, r.Value)
			if r.Offset < localStart {
				coldBytes += int64(len(r.Value))
			}
			next++
		})
	}
	elapsed := time.Since(start)
	rate := float64(coldBytes) / elapsed.Seconds()
	t.Logf("backfill read %d cold bytes in %v: %.0f B/s against a budget of %d B/s; %d throttled responses",
		coldBytes, elapsed.Round(time.Millisecond), rate, budget, throttles.n.Load())
	// One window's worth may come at once (quota/rate.go), so the bound
	// is the budget over the elapsed time plus one second of it.
	if limit := budget * (elapsed.Seconds() + 1) * 1.1; float64(coldBytes) > limit {
		t.Errorf("backfill got %d cold bytes in %v, over the budget's %.0f", coldBytes, elapsed, limit)
	}
	if throttles.n.Load() == 0 {
		t.Error("no fetch carried throttle_time_ms")
	}
}
