package quota

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRateWindowThrottleMath(t *testing.T) {
	var w rateWindow
	const q = 1000.0 // bytes per second
	if got := w.throttleMs(0, q); got != 0 {
		t.Fatalf("empty window throttles %d ms", got)
	}
	// 3 s worth at once: the span is floored at one window, so the rate
	// is 3q and it takes 2 s more of silence to fall back to q.
	w.record(0, 3*q)
	if got := w.throttleMs(0, q); got != 2000 {
		t.Fatalf("throttle %d ms, want 2000", got)
	}
	// After 1.5 s the span is 1.5 s: (3000 - 1500)/1000 = 1.5 s left.
	if got := w.throttleMs(1500, q); got != 1500 {
		t.Fatalf("throttle at 1.5 s = %d ms, want 1500", got)
	}
	if got := w.throttleMs(3000, q); got != 0 {
		t.Fatalf("throttle at 3 s = %d ms, want 0", got)
	}
	if r := w.rate(2000); math.Abs(r-1500) > 1e-9 {
		t.Fatalf("rate at 2 s = %v, want 1500", r)
	}
}

func TestRateWindowSamplesExpire(t *testing.T) {
	var w rateWindow
	w.record(0, 1e9)
	// 12 further windows, one record each: the first sample is reused.
	for i := int64(1); i <= 12; i++ {
		w.record(i*windowMs, 10)
	}
	total, span := w.measure(12 * windowMs)
	if total != 110 || span != 10*windowMs {
		t.Fatalf("total %v span %d, want 110 over 10000 ms (11 live samples)", total, span)
	}
	// A sample older than 11 windows counts for nothing even if unused.
	var v rateWindow
	v.record(0, 5e6)
	if total, _ := v.measure(maxThrottleMs); total != 0 {
		t.Fatalf("obsolete sample still counted: %v", total)
	}
	if !v.idle(maxThrottleMs) || v.idle(maxThrottleMs-1) {
		t.Fatal("idle() disagrees with sample expiry")
	}
	if got := v.throttleMs(1, 1); got != maxThrottleMs {
		t.Fatalf("throttle %d, want the cap %d", got, maxThrottleMs)
	}
}

// A greedy client that waits out every throttle achieves the quota over
// 30 s (the acceptance, here on the math alone).
func TestRateWindowGreedyClientConverges(t *testing.T) {
	for _, tc := range []struct {
		quota, request float64
		sendMs         int64
	}{
		{quota: 1 << 20, request: 64 << 10, sendMs: 1},
		{quota: 1 << 20, request: 1 << 20, sendMs: 0},
		{quota: 100 << 10, request: 3000, sendMs: 2},
		{quota: 5 << 20, request: 900 << 10, sendMs: 5},
	} {
		var w rateWindow
		var now int64
		sent := 0.0
		for now < 30000 {
			w.record(now, tc.request)
			sent += tc.request
			now += max(int64(w.throttleMs(now, tc.quota)), tc.sendMs, 1)
		}
		achieved := sent / (float64(now) / 1000)
		if math.Abs(achieved-tc.quota)/tc.quota > 0.10 {
			t.Errorf("%+v: achieved %.0f B/s over %d ms, quota %.0f", tc, achieved, now, tc.quota)
		}
	}
}

func TestQuotaPrecedence(t *testing.T) {
	all := map[Entity]map[string]float64{
		{User: "alice", ClientID: "c1"}:            {KeyProducerByteRate: 1},
		{User: "alice", DefaultClientID: true}:     {KeyProducerByteRate: 2},
		{User: "alice"}:                            {KeyProducerByteRate: 3, KeyConsumerByteRate: 30},
		{DefaultUser: true, ClientID: "c1"}:        {KeyProducerByteRate: 4},
		{DefaultUser: true, DefaultClientID: true}: {KeyProducerByteRate: 5},
		{DefaultUser: true}:                        {KeyProducerByteRate: 6},
		{ClientID: "c9"}:                           {KeyProducerByteRate: 7},
		{DefaultClientID: true}:                    {KeyProducerByteRate: 8, KeyRequestPercentage: 80},
	}
	drop := func(keep ...Entity) *Snapshot {
		c := NewSnapshot(map[Entity]map[string]float64{})
		for _, e := range keep {
			c.entries[e] = all[e]
		}
		return c
	}
	full := NewSnapshot(all)
	for _, tc := range []struct {
		name         string
		cfg          *Snapshot
		kind         Kind
		user, client string
		want         float64
		key          SensorKey
	}{
		{"user+client", full, Produce, "alice", "c1", 1, SensorKey{Produce, "alice", "c1"}},
		{"user+default client", full, Produce, "alice", "c2", 2, SensorKey{Produce, "alice", "c2"}},
		{"user only shares", drop(Entity{User: "alice"}), Produce, "alice", "c2", 3, SensorKey{Produce, "alice", ""}},
		{"per name resolution", full, Fetch, "alice", "c1", 30, SensorKey{Fetch, "alice", ""}},
		{"default user+client", full, Produce, "bob", "c1", 4, SensorKey{Produce, "bob", "c1"}},
		{"default user+default client", full, Produce, "bob", "c2", 5, SensorKey{Produce, "bob", "c2"}},
		{"default user", drop(Entity{DefaultUser: true}, Entity{ClientID: "c9"}), Produce, "bob", "c9", 6, SensorKey{Produce, "bob", ""}},
		{"client only", drop(Entity{ClientID: "c9"}, Entity{DefaultClientID: true}), Produce, "bob", "c9", 7, SensorKey{Produce, "", "c9"}},
		{"default client", drop(Entity{ClientID: "c9"}, Entity{DefaultClientID: true}), Produce, "bob", "c1", 8, SensorKey{Produce, "", "c1"}},
		{"request percentage", full, Request, "zed", "c3", 80, SensorKey{Request, "", "c3"}},
	} {
		got, key, ok := tc.cfg.resolve(tc.kind, tc.user, tc.client)
		if !ok || got != tc.want || key != tc.key {
			t.Errorf("%s: got %v %+v %v, want %v %+v", tc.name, got, key, ok, tc.want, tc.key)
		}
	}
	if _, _, ok := drop(Entity{User: "alice"}).resolve(Produce, "bob", "c1"); ok {
		t.Error("alice's quota applied to bob")
	}
	var none *Snapshot
	if _, _, ok := none.resolve(Produce, "a", "b"); ok {
		t.Error("nil config limits")
	}
	if User("User:alice") != "alice" || User("User:ANONYMOUS") != "ANONYMOUS" {
		t.Error("quotaUser")
	}
}

func TestQuotaStateSharedSensorAndSweep(t *testing.T) {
	var now int64
	q := newTestManager(t, map[Entity]map[string]float64{
		{User: "alice"}: {KeyProducerByteRate: 1000},
	}, func() int64 { return now })
	// Two clients of alice share her user-level quota.
	throttle1 := q.Charge(Produce, User("User:alice"), "a", 1000)
	throttle2 := q.Charge(Produce, User("User:alice"), "b", 1000)
	if throttle1 != 0 || throttle2 != 1000 {
		t.Fatalf("throttles %d %d, want 0 and 1000 (shared sensor)", throttle1, throttle2)
	}
	other := q.Charge(Produce, User("User:bob"), "a", 1e9)
	if other != 0 || len(q.mu.sensors) != 1 {
		t.Fatalf("unlimited client throttled %d / tracked (%d sensors)", other, len(q.mu.sensors))
	}
	now = 2 * maxThrottleMs
	q.Record(SensorKey{Kind: ColdRead, Client: "x"}, 1, 1)
	if len(q.mu.sensors) != 1 {
		t.Fatalf("idle sensor not swept: %d sensors", len(q.mu.sensors))
	}
}

func TestQuotaFilter(t *testing.T) {
	s := func(v string) *string { return &v }
	comp := func(typ string, mt kmsg.QuotasMatchType, m *string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: mt, Match: m}
	}
	alice := Entity{User: "alice"}
	aliceC := Entity{User: "alice", ClientID: "c"}
	defUser := Entity{DefaultUser: true}
	client := Entity{ClientID: "c"}
	for _, tc := range []struct {
		name   string
		comps  []kmsg.DescribeClientQuotasRequestComponent
		strict bool
		match  []Entity
		miss   []Entity
	}{
		{"exact user", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, s("alice"))}, false,
			[]Entity{alice, aliceC}, []Entity{defUser, client}},
		{"exact user strict", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, s("alice"))}, true,
			[]Entity{alice}, []Entity{aliceC, defUser}},
		{"default user", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 1, nil)}, false,
			[]Entity{defUser}, []Entity{alice, client}},
		{"any client", []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", 2, nil)}, false,
			[]Entity{aliceC, client}, []Entity{alice, defUser}},
		{"everything", nil, false, []Entity{alice, aliceC, defUser, client}, nil},
	} {
		f, err := ParseFilter(tc.comps, tc.strict)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, e := range tc.match {
			if !f.Matches(e) {
				t.Errorf("%s: %+v not matched", tc.name, e)
			}
		}
		for _, e := range tc.miss {
			if f.Matches(e) {
				t.Errorf("%s: %+v matched", tc.name, e)
			}
		}
	}
	for _, bad := range [][]kmsg.DescribeClientQuotasRequestComponent{
		{comp("ip", 2, nil)}, {comp("user", 0, nil)}, {comp("user", 1, s("x"))},
		{comp("user", 2, nil), comp("user", 1, nil)}, {comp("user", 7, nil)},
	} {
		if _, err := ParseFilter(bad, false); err == nil {
			t.Errorf("filter %+v accepted", bad)
		}
	}
}

func TestAlterQuotaValidation(t *testing.T) {
	s := func(v string) *string { return &v }
	ent := func(typ string, name *string) kmsg.AlterClientQuotasRequestEntryEntity {
		return kmsg.AlterClientQuotasRequestEntryEntity{Type: typ, Name: name}
	}
	e, err := ParseAlterEntity([]kmsg.AlterClientQuotasRequestEntryEntity{ent("user", nil), ent("client-id", s("c"))})
	if err != nil || e != (Entity{DefaultUser: true, ClientID: "c"}) {
		t.Fatalf("entity %+v %v", e, err)
	}
	for _, bad := range [][]kmsg.AlterClientQuotasRequestEntryEntity{
		nil, {ent("ip", s("1.2.3.4"))}, {ent("user", s("a")), ent("user", s("b"))}, {ent("user", s(""))},
	} {
		if _, err := ParseAlterEntity(bad); err == nil {
			t.Errorf("entity %+v accepted", bad)
		}
	}
	op := func(k string, v float64, rm bool) kmsg.AlterClientQuotasRequestEntryOp {
		return kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: v, Remove: rm}
	}
	set, remove, err := ParseOps([]kmsg.AlterClientQuotasRequestEntryOp{
		op(KeyProducerByteRate, 1024, false), op(KeyRequestPercentage, 12.5, false), op(KeyConsumerByteRate, 0, true),
	})
	if err != nil || len(set) != 2 || len(remove) != 1 || remove[0] != KeyConsumerByteRate {
		t.Fatalf("ops %v %v %v", set, remove, err)
	}
	for _, bad := range [][]kmsg.AlterClientQuotasRequestEntryOp{
		{op("bogus", 1, false)}, {op(KeyProducerByteRate, 1.5, false)}, {op(KeyProducerByteRate, 0, false)},
		{op(KeyRequestPercentage, math.NaN(), false)}, {op(KeyConsumerByteRate, -5, false)},
		{op(KeyProducerByteRate, 1, false), op(KeyProducerByteRate, 2, false)},
	} {
		if _, _, err := ParseOps(bad); err == nil {
			t.Errorf("ops %+v accepted", bad)
		}
	}
}

// newTestManager is a Manager loading entries from an in-memory store,
// on the clock nowMs; its loader stops with the test.
func newTestManager(t *testing.T, entries map[Entity]map[string]float64, nowMs func() int64) *Manager {
	t.Helper()
	lifetime, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	q := &Manager{}
	q.Attach(NewMemStore(entries), lifetime, nil)
	q.SetClock(nowMs)
	return q
}

// The first Charge loads the quotas and waits for them; a change in the
// store reaches the snapshot through the watch, without a Reload call.
func TestManagerLoadsAndFollowsTheStore(t *testing.T) {
	var now int64
	store := NewMemStore(map[Entity]map[string]float64{{DefaultClientID: true}: {KeyProducerByteRate: 100}})
	lifetime, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &Manager{}
	q.Attach(store, lifetime, nil)
	q.SetClock(func() int64 { return now })
	if got := q.Charge(Produce, "alice", "c", 300); got != 2000 {
		t.Fatalf("first charge: throttle %d ms, want 2000 (quota loaded before it)", got)
	}
	store.Set(Entity{DefaultClientID: true}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for q.Charge(Produce, "alice", "other", 1e9) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("removed quota still enforced after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Without a store (no Attach) nothing is limited, and Reload is a no-op.
func TestManagerWithoutStore(t *testing.T) {
	var q Manager
	if got := q.Charge(Produce, "alice", "c", 1e12); got != 0 {
		t.Fatalf("throttle %d without quotas", got)
	}
	if err := q.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCountedBytes(t *testing.T) {
	pr := kmsg.NewPtrProduceRequest()
	pr.Topics = []kmsg.ProduceRequestTopic{{Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, 150)}, {Records: make([]byte, 50)}}}}
	fr := kmsg.NewPtrFetchResponse()
	fr.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, 300)}}}}
	if ProduceBytes(pr) != 200 || FetchBytes(fr) != 300 {
		t.Fatalf("produce %d fetch %d, want 200 and 300", ProduceBytes(pr), FetchBytes(fr))
	}
}
