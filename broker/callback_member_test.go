package broker

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// callbackMember is a franz-go group member on one topic whose owned
// partitions are what its assignment callbacks said (assigned minus
// revoked and lost). A goroutine polls, which drives the group; it ends
// when the client is closed (at cleanup at the latest).
type callbackMember struct {
	cl *kgo.Client
	mu sync.Mutex
	ps map[int32]bool
}

func newCallbackMember(tb testing.TB, addr, group, topic string, opts ...kgo.Opt) *callbackMember {
	tb.Helper()
	m := &callbackMember{ps: map[int32]bool{}}
	set := func(on bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				if on {
					m.ps[p] = true
				} else {
					delete(m.ps, p)
				}
			}
		}
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.OnPartitionsAssigned(set(true)), kgo.OnPartitionsRevoked(set(false)), kgo.OnPartitionsLost(set(false))}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		tb.Fatal(err)
	}
	m.cl = cl
	tb.Cleanup(cl.Close)
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return m
}

// partitions is what the member owns, sorted.
func (m *callbackMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int32, 0, len(m.ps))
	for p := range m.ps {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
