package broker

// Client quotas (issue 9): Kafka's producer_byte_rate, consumer_byte_rate
// and request_percentage per (user, client-id) entity, stored in etcd
// (metadata quotas/ keys, loaded by quota_store.go), measured by
// quota_rate.go and answered as Kafka does since KIP-219: the response is
// sent at once with throttle_time_ms set, and the connection reads no more
// of that client's requests for that long (conn.go); clients also wait on
// their side.
//
// Plus the cold-read budget: a per-client byte rate for fetch bytes served
// from the bucket (tier.ColdConfig.ClientBytesPerSecond), so one backfill
// cannot take all the bucket bandwidth of the cold reader.
//
// What counts: Produce, the record-batch bytes of the request; Fetch, the
// record bytes of the response (follower fetches are exempt, as Kafka
// exempts replication from client quotas); request_percentage, the
// handler's time as a percentage of one thread, for APIs that do not wait
// in the handler (Produce, Fetch, JoinGroup and SyncGroup park there as in
// Kafka's purgatories, which Kafka does not count either).

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaKind is what a quota limits.
type quotaKind uint8

const (
	quotaProduce  quotaKind = iota // producer_byte_rate, bytes/s
	quotaFetch                     // consumer_byte_rate, bytes/s
	quotaRequest                   // request_percentage, % of one thread
	quotaColdRead                  // cold-read budget, bytes/s (broker flag)
)

// configKey is the quota's name in DescribeClientQuotas/AlterClientQuotas.
func (k quotaKind) configKey() string {
	switch k {
	case quotaProduce:
		return quotaKeyProducerByteRate
	case quotaFetch:
		return quotaKeyConsumerByteRate
	case quotaRequest:
		return quotaKeyRequestPercentage
	}
	return ""
}

// maxQuotaSensors bounds the rates tracked at once: client ids come from
// the network. Idle sensors are swept first; past the bound a new client
// is not measured (fail open rather than grow without limit).
const maxQuotaSensors = 1 << 16

// quotaSweepEvery is how often (ms) recording sweeps idle sensors.
const quotaSweepEvery = quotaMaxThrottleMs

// quotaState is the broker's quota state; its zero value is ready (no
// quotas configured, clock started at first use).
type quotaState struct {
	// config is the current snapshot (nil: none loaded; no quotas).
	// Replaced whole by the loader (quota_store.go).
	config atomic.Pointer[quotaConfig]
	// loadOnce starts the loader at the first request.
	loadOnce sync.Once

	mu struct {
		sync.Mutex
		// base is the monotonic origin of the millisecond clock.
		base time.Time
		// now overrides the clock in tests (nil: time.Since(base)).
		now       func() int64
		sensors   map[sensorKey]*rateWindow
		lastSweep int64
	}
}

// nowMsLocked is the quota clock. REQUIRES: q.mu held.
func (q *quotaState) nowMsLocked() int64 {
	if q.mu.now != nil {
		return q.mu.now()
	}
	if q.mu.base.IsZero() {
		q.mu.base = time.Now()
	}
	return time.Since(q.mu.base).Milliseconds()
}

// record adds v to the sensor key and returns the throttle for limit.
func (q *quotaState) record(key sensorKey, limit, v float64) int32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.nowMsLocked()
	w := q.sensorLocked(key, now)
	if w == nil {
		return 0
	}
	w.record(now, v)
	return w.throttleMs(now, limit)
}

// throttleOf is the sensor's current throttle without recording.
func (q *quotaState) throttleOf(key sensorKey, limit float64) int32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.mu.sensors[key]
	if w == nil {
		return 0
	}
	return w.throttleMs(q.nowMsLocked(), limit)
}

// sensorLocked returns key's rate, creating it if the bound allows.
// REQUIRES: q.mu held.
func (q *quotaState) sensorLocked(key sensorKey, now int64) *rateWindow {
	if w := q.mu.sensors[key]; w != nil {
		return w
	}
	if q.mu.sensors == nil {
		q.mu.sensors = map[sensorKey]*rateWindow{}
	}
	if now-q.mu.lastSweep >= quotaSweepEvery || len(q.mu.sensors) >= maxQuotaSensors {
		q.mu.lastSweep = now
		for k, w := range q.mu.sensors {
			if w.idle(now) {
				delete(q.mu.sensors, k)
			}
		}
	}
	if len(q.mu.sensors) >= maxQuotaSensors {
		return nil
	}
	w := &rateWindow{}
	q.mu.sensors[key] = w
	return w
}

// recordQuota records bytes (or, for quotaRequest, percent-seconds ×
// 1000: see withQuotas) of kind for the request's client and raises
// rc.throttleMs to the throttle its quota calls for. Called from the
// request's handler goroutine only.
func (b *Broker) recordQuota(rc *requestContext, kind quotaKind, bytes int64) {
	b.quotas.loadOnce.Do(b.startQuotaLoader)
	limit, key, ok := b.quotas.config.Load().resolve(kind, quotaUser(rc.principal), rc.clientID)
	if !ok {
		return
	}
	v := float64(bytes)
	if kind == quotaRequest {
		v /= 1000 // recorded in percent-milliseconds
	}
	rc.throttleMs = max(rc.throttleMs, b.quotas.record(key, limit, v))
}

// applyThrottle writes rc.throttleMs into resp's throttle_time_ms before
// the response is encoded. Called by the connection for every response.
func (b *Broker) applyThrottle(rc *requestContext, resp kmsg.Response) {
	if rc.throttleMs <= 0 {
		return
	}
	if t, ok := resp.(interface{ SetThrottle(int32) }); ok {
		t.SetThrottle(rc.throttleMs)
	}
}

// withQuotas wraps a handler with quota accounting: produce bytes before
// it runs, fetch bytes and handler time after, and the cold-read budget's
// throttle carried out of the fetch's cold reads. The handler time of APIs
// that park (apiSpec.waitsInHandler) is not counted.
func (b *Broker) withQuotas(key int16, h handlerFunc) handlerFunc {
	waitsInHandler := specOf(key).waitsInHandler
	return func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
		start := time.Now()
		if pr, ok := req.(*kmsg.ProduceRequest); ok {
			b.recordQuota(rc, quotaProduce, produceRequestBytes(pr))
		}
		var cold *coldBudgetUse
		if fr, ok := req.(*kmsg.FetchRequest); ok && !isFollowerFetch(fr) && b.cfg.Cold.ClientBytesPerSecond > 0 {
			cold = &coldBudgetUse{key: sensorKey{kind: quotaColdRead, user: quotaUser(rc.principal), client: rc.clientID}}
			ctx = context.WithValue(ctx, coldBudgetKey{}, cold)
		}
		resp, err := h(ctx, rc, req)
		if fr, ok := resp.(*kmsg.FetchResponse); ok && !isFollowerFetch(req.(*kmsg.FetchRequest)) {
			b.recordQuota(rc, quotaFetch, fetchResponseBytes(fr))
		}
		if cold != nil {
			rc.throttleMs = max(rc.throttleMs, cold.throttleMs.Load())
		}
		if !waitsInHandler {
			// percent of one thread × seconds = elapsed µs / 10_000; kept
			// in thousandths by recordQuota's division.
			b.recordQuota(rc, quotaRequest, time.Since(start).Microseconds()/10)
		}
		return resp, err
	}
}

func isFollowerFetch(r *kmsg.FetchRequest) bool {
	return fetchReplicaID(r) >= 0
}

// produceRequestBytes is the record-batch bytes of a Produce request.
func produceRequestBytes(r *kmsg.ProduceRequest) int64 {
	var n int64
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.Records))
		}
	}
	return n
}

// fetchResponseBytes is the record bytes of a Fetch response.
func fetchResponseBytes(r *kmsg.FetchResponse) int64 {
	var n int64
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.RecordBatches))
		}
	}
	return n
}
