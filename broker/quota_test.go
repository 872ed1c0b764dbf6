package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/quota"
)

// withTestQuotas gives b's quota manager an in-memory store holding
// entries and the clock nowMs; its loader stops with the test.
func withTestQuotas(t *testing.T, b *Broker, entries map[quota.Entity]map[string]float64, nowMs func() int64) {
	t.Helper()
	lifetime, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b.quotas.Attach(quota.NewMemStore(entries), lifetime, nil)
	b.quotas.SetClock(nowMs)
}

func TestApplyThrottle(t *testing.T) {
	resp := kmsg.NewPtrProduceResponse()
	applyThrottle(&requestContext{throttleMs: 1234}, resp)
	if resp.ThrottleMillis != 1234 {
		t.Fatalf("throttle_time_ms %d", resp.ThrottleMillis)
	}
}

func TestColdReadBudget(t *testing.T) {
	b := &Broker{}
	var now int64
	b.quotas.SetClock(func() int64 { return now })
	src := coldSource{quotas: &b.quotas, clientBudget: 1000}
	use := &coldBudgetUse{key: quota.SensorKey{Kind: quota.ColdRead, User: "ANONYMOUS", Client: "backfill"}}
	ctx := context.WithValue(context.Background(), coldBudgetKey{}, use)
	reads := 0
	read := func() ([]byte, error) { reads++; return make([]byte, 3000), nil }
	if data, err := src.readColdBudgeted(ctx, read); err != nil || len(data) != 3000 {
		t.Fatalf("first cold read: %d bytes, %v", len(data), err)
	}
	if got := use.throttleMs.Load(); got != 2000 {
		t.Fatalf("throttle after 3000 B against 1000 B/s: %d ms, want 2000", got)
	}
	if data, err := src.readColdBudgeted(ctx, read); err != nil || len(data) != 0 || reads != 1 {
		t.Fatalf("over budget: %d bytes, %d reads, %v; want no bucket read", len(data), reads, err)
	}
	// Another client has its own budget; without a budget in ctx
	// (followers, budget off) reads are not counted.
	other := &coldBudgetUse{key: quota.SensorKey{Kind: quota.ColdRead, Client: "tail"}}
	if data, _ := src.readColdBudgeted(context.WithValue(context.Background(), coldBudgetKey{}, other), read); len(data) != 3000 {
		t.Fatal("another client's cold read was throttled")
	}
	if data, _ := src.readColdBudgeted(context.Background(), read); len(data) != 3000 {
		t.Fatal("a read without a budget was throttled")
	}
	now = 3000 // the rate is back at the budget
	if data, _ := src.readColdBudgeted(ctx, read); len(data) != 3000 {
		t.Fatal("cold read still throttled after the budget recovered")
	}
}

func TestWithQuotasAccounting(t *testing.T) {
	b := &Broker{}
	b.cfg.Cold.ClientBytesPerSecond = 1
	var now int64
	withTestQuotas(t, b, map[quota.Entity]map[string]float64{
		{DefaultClientID: true}: {quota.KeyProducerByteRate: 100, quota.KeyConsumerByteRate: 100},
	}, func() int64 { return now })
	var sawBudget bool
	handler := b.withQuotas(1, func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
		_, sawBudget = ctx.Value(coldBudgetKey{}).(*coldBudgetUse)
		resp := kmsg.NewPtrFetchResponse()
		resp.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, 300)}}}}
		return resp, nil
	})
	fetch := kmsg.NewPtrFetchRequest()
	rc := &requestContext{principal: anonymousPrincipal, clientID: "c"}
	if _, err := handler(context.Background(), rc, fetch); err != nil {
		t.Fatal(err)
	}
	if !sawBudget || rc.throttleMs != 2000 {
		t.Fatalf("consumer fetch of 300 B at 100 B/s: throttle %d ms (want 2000), budget in ctx %v", rc.throttleMs, sawBudget)
	}
	follower := kmsg.NewPtrFetchRequest()
	follower.ReplicaID = 2
	rc = &requestContext{principal: anonymousPrincipal, clientID: "c"}
	if _, _ = handler(context.Background(), rc, follower); rc.throttleMs != 0 || sawBudget {
		t.Fatalf("follower fetch throttled %d ms / budgeted %v", rc.throttleMs, sawBudget)
	}
	produce := b.withQuotas(0, func(context.Context, *requestContext, kmsg.Request) (kmsg.Response, error) {
		return kmsg.NewPtrProduceResponse(), nil
	})
	pr := kmsg.NewPtrProduceRequest()
	pr.Topics = []kmsg.ProduceRequestTopic{{Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, 150)}, {Records: make([]byte, 150)}}}}
	rc = &requestContext{principal: anonymousPrincipal, clientID: "p"}
	if _, _ = produce(context.Background(), rc, pr); rc.throttleMs != 2000 {
		t.Fatalf("produce of 300 B at 100 B/s: throttle %d ms, want 2000", rc.throttleMs)
	}
}
