package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeRange reads topic/partition offsets [from, to) with a fresh
// consumer and returns the records in the order the broker served them. It
// fails t if the range is not complete before the timeout; records past `to`
// that arrive in the same fetch are returned too, so callers can detect them.
func consumeRange(t testing.TB, b *Broker, topic string, partition int32, from, to int64) []*kgo.Record {
	t.Helper()
	if to <= from {
		return nil
	}
	cl := b.Client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {partition: kgo.NewOffset().At(from)},
		}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	defer cl.Close()
	ctx := testCtx(t, 60*time.Second)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < to-1 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s[%d] [%d,%d): got %d records before timeout", topic, partition, from, to, len(out))
		}
		fetches.EachError(func(tp string, p int32, err error) {
			t.Fatalf("consume %s[%d]: %v", tp, p, err)
		})
		out = append(out, fetches.Records()...)
	}
	return out
}

// offsetsOf returns the partition → offset map of a kadm ListOffsets answer.
func offsetsOf(t testing.TB, lo kadm.ListedOffsets, err error, topic string) map[int32]int64 {
	t.Helper()
	if err != nil {
		t.Fatalf("list offsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic {
			return
		}
		if o.Err != nil {
			t.Fatalf("list offsets %s[%d]: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

func endOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	return offsetsOf(t, lo, err, topic)
}

func startOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lo, err := adm.ListStartOffsets(ctx, topic)
	return offsetsOf(t, lo, err, topic)
}

// produceSync produces records one ProduceSync call at a time and fails t on
// any error; it returns the records with their assigned offsets.
func produceSync(t testing.TB, cl *kgo.Client, rs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return rs
}
