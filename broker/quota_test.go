package broker

import (
	"context"
	"math"
	"testing"

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
		w.record(i*quotaWindowMs, 10)
	}
	total, span := w.measure(12 * quotaWindowMs)
	if total != 110 || span != 10*quotaWindowMs {
		t.Fatalf("total %v span %d, want 110 over 10000 ms (11 live samples)", total, span)
	}
	// A sample older than 11 windows counts for nothing even if unused.
	var v rateWindow
	v.record(0, 5e6)
	if total, _ := v.measure(quotaMaxThrottleMs); total != 0 {
		t.Fatalf("obsolete sample still counted: %v", total)
	}
	if !v.idle(quotaMaxThrottleMs) || v.idle(quotaMaxThrottleMs-1) {
		t.Fatal("idle() disagrees with sample expiry")
	}
	if got := v.throttleMs(1, 1); got != quotaMaxThrottleMs {
		t.Fatalf("throttle %d, want the cap %d", got, quotaMaxThrottleMs)
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
	all := map[quotaEntity]map[string]float64{
		{User: "alice", ClientID: "c1"}:            {quotaKeyProducerByteRate: 1},
		{User: "alice", DefaultClientID: true}:     {quotaKeyProducerByteRate: 2},
		{User: "alice"}:                            {quotaKeyProducerByteRate: 3, quotaKeyConsumerByteRate: 30},
		{DefaultUser: true, ClientID: "c1"}:        {quotaKeyProducerByteRate: 4},
		{DefaultUser: true, DefaultClientID: true}: {quotaKeyProducerByteRate: 5},
		{DefaultUser: true}:                        {quotaKeyProducerByteRate: 6},
		{ClientID: "c9"}:                           {quotaKeyProducerByteRate: 7},
		{DefaultClientID: true}:                    {quotaKeyProducerByteRate: 8, quotaKeyRequestPercentage: 80},
	}
	drop := func(keep ...quotaEntity) *quotaConfig {
		c := &quotaConfig{entries: map[quotaEntity]map[string]float64{}}
		for _, e := range keep {
			c.entries[e] = all[e]
		}
		return c
	}
	full := &quotaConfig{entries: all}
	for _, tc := range []struct {
		name         string
		cfg          *quotaConfig
		kind         quotaKind
		user, client string
		want         float64
		key          sensorKey
	}{
		{"user+client", full, quotaProduce, "alice", "c1", 1, sensorKey{quotaProduce, "alice", "c1"}},
		{"user+default client", full, quotaProduce, "alice", "c2", 2, sensorKey{quotaProduce, "alice", "c2"}},
		{"user only shares", drop(quotaEntity{User: "alice"}), quotaProduce, "alice", "c2", 3, sensorKey{quotaProduce, "alice", ""}},
		{"per name resolution", full, quotaFetch, "alice", "c1", 30, sensorKey{quotaFetch, "alice", ""}},
		{"default user+client", full, quotaProduce, "bob", "c1", 4, sensorKey{quotaProduce, "bob", "c1"}},
		{"default user+default client", full, quotaProduce, "bob", "c2", 5, sensorKey{quotaProduce, "bob", "c2"}},
		{"default user", drop(quotaEntity{DefaultUser: true}, quotaEntity{ClientID: "c9"}), quotaProduce, "bob", "c9", 6, sensorKey{quotaProduce, "bob", ""}},
		{"client only", drop(quotaEntity{ClientID: "c9"}, quotaEntity{DefaultClientID: true}), quotaProduce, "bob", "c9", 7, sensorKey{quotaProduce, "", "c9"}},
		{"default client", drop(quotaEntity{ClientID: "c9"}, quotaEntity{DefaultClientID: true}), quotaProduce, "bob", "c1", 8, sensorKey{quotaProduce, "", "c1"}},
		{"request percentage", full, quotaRequest, "zed", "c3", 80, sensorKey{quotaRequest, "", "c3"}},
	} {
		got, key, ok := tc.cfg.resolve(tc.kind, tc.user, tc.client)
		if !ok || got != tc.want || key != tc.key {
			t.Errorf("%s: got %v %+v %v, want %v %+v", tc.name, got, key, ok, tc.want, tc.key)
		}
	}
	if _, _, ok := drop(quotaEntity{User: "alice"}).resolve(quotaProduce, "bob", "c1"); ok {
		t.Error("alice's quota applied to bob")
	}
	var none *quotaConfig
	if _, _, ok := none.resolve(quotaProduce, "a", "b"); ok {
		t.Error("nil config limits")
	}
	if quotaUser("User:alice") != "alice" || quotaUser(anonymousPrincipal) != "ANONYMOUS" {
		t.Error("quotaUser")
	}
}

func TestQuotaStateSharedSensorAndSweep(t *testing.T) {
	var q quotaState
	var now int64
	q.mu.now = func() int64 { return now }
	b := &Broker{}
	b.quotas.loadOnce.Do(func() {}) // no store: nothing to load
	b.quotas.config.Store(&quotaConfig{entries: map[quotaEntity]map[string]float64{
		{User: "alice"}: {quotaKeyProducerByteRate: 1000},
	}})
	b.quotas.mu.now = q.mu.now
	// Two clients of alice share her user-level quota.
	rc1 := &requestContext{principal: "User:alice", clientID: "a"}
	rc2 := &requestContext{principal: "User:alice", clientID: "b"}
	b.recordQuota(rc1, quotaProduce, 1000)
	b.recordQuota(rc2, quotaProduce, 1000)
	if rc1.throttleMs != 0 || rc2.throttleMs != 1000 {
		t.Fatalf("throttles %d %d, want 0 and 1000 (shared sensor)", rc1.throttleMs, rc2.throttleMs)
	}
	other := &requestContext{principal: "User:bob", clientID: "a"}
	b.recordQuota(other, quotaProduce, 1e9)
	if other.throttleMs != 0 || len(b.quotas.mu.sensors) != 1 {
		t.Fatalf("unlimited client throttled %d / tracked (%d sensors)", other.throttleMs, len(b.quotas.mu.sensors))
	}
	now = 2 * quotaMaxThrottleMs
	b.quotas.record(sensorKey{kind: quotaColdRead, client: "x"}, 1, 1)
	if len(b.quotas.mu.sensors) != 1 {
		t.Fatalf("idle sensor not swept: %d sensors", len(b.quotas.mu.sensors))
	}
}

func TestApplyThrottle(t *testing.T) {
	b := &Broker{}
	resp := kmsg.NewPtrProduceResponse()
	b.applyThrottle(&requestContext{throttleMs: 1234}, resp)
	if resp.ThrottleMillis != 1234 {
		t.Fatalf("throttle_time_ms %d", resp.ThrottleMillis)
	}
}

func TestQuotaFilter(t *testing.T) {
	s := func(v string) *string { return &v }
	comp := func(typ string, mt kmsg.QuotasMatchType, m *string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: mt, Match: m}
	}
	alice := quotaEntity{User: "alice"}
	aliceC := quotaEntity{User: "alice", ClientID: "c"}
	defUser := quotaEntity{DefaultUser: true}
	client := quotaEntity{ClientID: "c"}
	for _, tc := range []struct {
		name   string
		comps  []kmsg.DescribeClientQuotasRequestComponent
		strict bool
		match  []quotaEntity
		miss   []quotaEntity
	}{
		{"exact user", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, s("alice"))}, false,
			[]quotaEntity{alice, aliceC}, []quotaEntity{defUser, client}},
		{"exact user strict", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, s("alice"))}, true,
			[]quotaEntity{alice}, []quotaEntity{aliceC, defUser}},
		{"default user", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 1, nil)}, false,
			[]quotaEntity{defUser}, []quotaEntity{alice, client}},
		{"any client", []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", 2, nil)}, false,
			[]quotaEntity{aliceC, client}, []quotaEntity{alice, defUser}},
		{"everything", nil, false, []quotaEntity{alice, aliceC, defUser, client}, nil},
	} {
		f, err := parseQuotaFilter(tc.comps, tc.strict)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, e := range tc.match {
			if !f.matches(e) {
				t.Errorf("%s: %+v not matched", tc.name, e)
			}
		}
		for _, e := range tc.miss {
			if f.matches(e) {
				t.Errorf("%s: %+v matched", tc.name, e)
			}
		}
	}
	for _, bad := range [][]kmsg.DescribeClientQuotasRequestComponent{
		{comp("ip", 2, nil)}, {comp("user", 0, nil)}, {comp("user", 1, s("x"))},
		{comp("user", 2, nil), comp("user", 1, nil)}, {comp("user", 7, nil)},
	} {
		if _, err := parseQuotaFilter(bad, false); err == nil {
			t.Errorf("filter %+v accepted", bad)
		}
	}
}

func TestAlterQuotaValidation(t *testing.T) {
	s := func(v string) *string { return &v }
	ent := func(typ string, name *string) kmsg.AlterClientQuotasRequestEntryEntity {
		return kmsg.AlterClientQuotasRequestEntryEntity{Type: typ, Name: name}
	}
	e, err := parseAlterQuotaEntity([]kmsg.AlterClientQuotasRequestEntryEntity{ent("user", nil), ent("client-id", s("c"))})
	if err != nil || e != (quotaEntity{DefaultUser: true, ClientID: "c"}) {
		t.Fatalf("entity %+v %v", e, err)
	}
	for _, bad := range [][]kmsg.AlterClientQuotasRequestEntryEntity{
		nil, {ent("ip", s("1.2.3.4"))}, {ent("user", s("a")), ent("user", s("b"))}, {ent("user", s(""))},
	} {
		if _, err := parseAlterQuotaEntity(bad); err == nil {
			t.Errorf("entity %+v accepted", bad)
		}
	}
	op := func(k string, v float64, rm bool) kmsg.AlterClientQuotasRequestEntryOp {
		return kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: v, Remove: rm}
	}
	set, remove, err := parseQuotaOps([]kmsg.AlterClientQuotasRequestEntryOp{
		op(quotaKeyProducerByteRate, 1024, false), op(quotaKeyRequestPercentage, 12.5, false), op(quotaKeyConsumerByteRate, 0, true),
	})
	if err != nil || len(set) != 2 || len(remove) != 1 || remove[0] != quotaKeyConsumerByteRate {
		t.Fatalf("ops %v %v %v", set, remove, err)
	}
	for _, bad := range [][]kmsg.AlterClientQuotasRequestEntryOp{
		{op("bogus", 1, false)}, {op(quotaKeyProducerByteRate, 1.5, false)}, {op(quotaKeyProducerByteRate, 0, false)},
		{op(quotaKeyRequestPercentage, math.NaN(), false)}, {op(quotaKeyConsumerByteRate, -5, false)},
		{op(quotaKeyProducerByteRate, 1, false), op(quotaKeyProducerByteRate, 2, false)},
	} {
		if _, _, err := parseQuotaOps(bad); err == nil {
			t.Errorf("ops %+v accepted", bad)
		}
	}
}

func TestColdReadBudget(t *testing.T) {
	b := &Broker{}
	var now int64
	b.quotas.mu.now = func() int64 { return now }
	src := coldSource{quotas: &b.quotas, clientBudget: 1000}
	use := &coldBudgetUse{key: sensorKey{kind: quotaColdRead, user: "ANONYMOUS", client: "backfill"}}
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
	other := &coldBudgetUse{key: sensorKey{kind: quotaColdRead, client: "tail"}}
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
	b.quotas.loadOnce.Do(func() {})
	b.quotas.config.Store(&quotaConfig{entries: map[quotaEntity]map[string]float64{
		{DefaultClientID: true}: {quotaKeyProducerByteRate: 100, quotaKeyConsumerByteRate: 100},
	}})
	var now int64
	b.quotas.mu.now = func() int64 { return now }
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
