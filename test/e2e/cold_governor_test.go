package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// TestColdGovernorBackfillBesideHotTail: with the cold-read governor set
// to throttle as soon as hot traffic runs (a target of 1 µs of run-queue
// wait per second, which any contended interval exceeds), a backfill from offset 0
// still reads every record intact and in order, while a producer and a
// tail consumer on another topic run throughout and lose nothing. The
// governor must have engaged: cold GETs waited for its limit.
func TestColdGovernorBackfillBesideHotTail(t *testing.T) {
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m, "--cold-governor-target", "0.000001", "--cold-fetch-size", "1048576",
		"--cold-cache-bytes", "4194304")
	const (
		topic      = "backfill"
		partitions = 2
	)
	createTopic(t, b.Admin(), topic, partitions, map[string]string{
		"internal.segment.bytes": "1048576", "local.retention.bytes": "1048576", "retention.ms": "-1"})
	createTopic(t, b.Admin(), "hot", 1, nil)
	tp := newTierProducer(b, topic, partitions)
	tp.produce(t, testCtx(t, 2*time.Minute), 12<<20)
	testkit.WaitFor(t, 60*time.Second, "most records only in the bucket", func() bool {
		s := fetchTierStatus(t, b, topic)
		return s[0].LocalStart > tp.next[0]/2 && s[1].LocalStart > tp.next[1]/2
	})

	stop := make(chan struct{})
	var hot sync.WaitGroup
	var produced, consumed int64
	var hotErr error
	hot.Add(1)
	go func() {
		defer hot.Done()
		produced, consumed, hotErr = runHotTail(b, stop)
	}()
	consumeColdFromZero(t, b, topic, tp)
	close(stop)
	hot.Wait()
	if hotErr != nil {
		t.Fatalf("hot tail: %v", hotErr)
	}
	if produced == 0 || consumed != produced {
		t.Fatalf("hot tail: %d records produced, %d consumed", produced, consumed)
	}
	if waited := metricSum(t, b, "strata_cold_governor_throttled_seconds_total"); waited <= 0 {
		t.Fatalf("the governor never throttled the backfill (waited %v s)", waited)
	}
}

// runHotTail produces one record every 2 ms to topic "hot" and consumes
// them at the tail until stop, then until every acknowledged record is
// read; it checks that values arrive in order.
func runHotTail(b *Broker, stop <-chan struct{}) (produced, consumed int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pcl := b.Client()
	defer pcl.Close()
	ccl := b.Client(kgo.ConsumeTopics("hot"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer ccl.Close()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			for consumed < produced {
				if consumed, err = pollHot(ctx, ccl, consumed); err != nil {
					return produced, consumed, err
				}
			}
			return produced, consumed, nil
		case <-tick.C:
		}
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "hot", Value: []byte(fmt.Sprint(produced))}).FirstErr(); err != nil {
			return produced, consumed, err
		}
		produced++
		if consumed, err = pollHot(ctx, ccl, consumed); err != nil {
			return produced, consumed, err
		}
	}
}

// pollHot reads what the tail consumer has, checking each value is the
// next number.
func pollHot(ctx context.Context, cl *kgo.Client, next int64) (int64, error) {
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	fetches := cl.PollFetches(pctx)
	if err := fetches.Err0(); err != nil && ctx.Err() == nil && pctx.Err() == nil {
		return next, err
	}
	var bad error
	fetches.EachRecord(func(r *kgo.Record) {
		if bad == nil && string(r.Value) != fmt.Sprint(next) {
			bad = fmt.Errorf("hot record %q at offset %d, want %d", r.Value, r.Offset, next)
		}
		next++
	})
	return next, bad
}
