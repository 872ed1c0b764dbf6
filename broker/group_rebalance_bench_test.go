package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/group/consumer"
)

// Group scale-out benchmark: a group of 3 members on a 24-partition topic
// gets a 4th member; the time from the new client's creation until every
// member owns its 6 partitions (by the members' own assignment callbacks)
// is the join latency. The same run measures it for a classic group with
// franz-go's cooperative-sticky balancer (the baseline) and for a group of
// the consumer protocol (KIP-848, uniform assignor), both heartbeating
// every 100 ms, and reports the consumer protocol's time as a fraction of
// the classic one (x-classic; below 1 is faster).
const (
	benchRebalancePartitions = 24
	benchRebalanceHeartbeat  = 100 * time.Millisecond
)

func BenchmarkGroupScaleOut(b *testing.B) {
	br := startBenchBrokerWith(b, func(c *Config) {
		c.Group = group.Config{OffsetsTopicPartitions: 4, InitialRebalanceDelay: -1,
			TickInterval: 20 * time.Millisecond, Consumer: consumer.Config{HeartbeatIntervalMs: int32(benchRebalanceHeartbeat.Milliseconds())}}
	})
	addr := br.Addr().String()
	var classic, next time.Duration
	b.ResetTimer()
	b.StopTimer() // only the joins are timed: ns/op is a classic plus a consumer-protocol join
	for i := range b.N {
		classic += scaleOutOnce(b, addr, fmt.Sprintf("classic-%d", i), false)
		next += scaleOutOnce(b, addr, fmt.Sprintf("next-%d", i), true)
	}
	b.ReportMetric(float64(classic.Milliseconds())/float64(b.N), "classic-join-ms")
	b.ReportMetric(float64(next.Milliseconds())/float64(b.N), "consumer-join-ms")
	b.ReportMetric(float64(next)/float64(classic), "x-classic")
}

// scaleOutOnce creates topic name with a stable group of 3 and returns how
// long the 4th member took to be folded in.
func scaleOutOnce(b *testing.B, addr, name string, nextGen bool) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, benchRebalancePartitions, 1, nil, name); err != nil {
		b.Fatal(err)
	}
	var members []*callbackMember
	defer func() {
		for _, m := range members {
			m.cl.Close()
		}
	}()
	for range 3 {
		members = append(members, newBenchMember(b, addr, name, nextGen))
	}
	waitBalanced(b, ctx, members)
	b.StartTimer()
	start := time.Now()
	members = append(members, newBenchMember(b, addr, name, nextGen))
	waitBalanced(b, ctx, members)
	took := time.Since(start)
	b.StopTimer()
	return took
}

func newBenchMember(b *testing.B, addr, topic string, nextGen bool) *callbackMember {
	opts := []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(benchRebalanceHeartbeat)}
	if nextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	return newCallbackMember(b, addr, topic, topic, opts...)
}

// waitBalanced waits until every member owns an equal share.
func waitBalanced(b *testing.B, ctx context.Context, members []*callbackMember) {
	share := benchRebalancePartitions / len(members)
	for {
		balanced := true
		for _, m := range members {
			balanced = balanced && len(m.partitions()) == share
		}
		if balanced {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("group of %d not balanced at %d partitions each within a minute", len(members), share)
		}
		time.Sleep(time.Millisecond)
	}
}
