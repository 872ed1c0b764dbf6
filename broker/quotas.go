package broker

// Client quotas: the glue between the request path and package quota,
// which resolves the configured quotas, measures the rates and computes
// throttles (quota/doc.go). Here: withQuotas charges each request's
// produce bytes, fetch bytes and handler time to its client, and
// applyThrottle writes the throttle into the response. The connection then
// reads no more of that client's requests for that long (wire.Mute).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/quota"
)

// chargeQuota charges amount of kind (see quota.Manager.Charge) to the
// request's client and raises rc.throttleMs to the throttle its quota
// calls for. Called from the request's handler goroutine only.
func chargeQuota(q *quota.Manager, rc *requestContext, kind quota.Kind, amount int64) {
	rc.throttleMs = max(rc.throttleMs, q.Charge(kind, quota.User(rc.principal), rc.clientID, amount))
}

// applyThrottle writes rc.throttleMs into resp's throttle_time_ms before
// the response is encoded. Called by the connection for every response.
func applyThrottle(rc *requestContext, resp kmsg.Response) {
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
			chargeQuota(&b.quotas, rc, quota.Produce, quota.ProduceBytes(pr))
		}
		var cold *coldBudgetUse
		if fr, ok := req.(*kmsg.FetchRequest); ok && !isFollowerFetch(fr) && b.cfg.Cold.ClientBytesPerSecond > 0 {
			cold = &coldBudgetUse{key: quota.SensorKey{Kind: quota.ColdRead, User: quota.User(rc.principal), Client: rc.clientID}}
			ctx = context.WithValue(ctx, coldBudgetKey{}, cold)
		}
		resp, err := h(ctx, rc, req)
		if fr, ok := resp.(*kmsg.FetchResponse); ok && !isFollowerFetch(req.(*kmsg.FetchRequest)) {
			chargeQuota(&b.quotas, rc, quota.Fetch, quota.FetchBytes(fr))
		}
		if cold != nil {
			rc.throttleMs = max(rc.throttleMs, cold.throttleMs.Load())
		}
		if !waitsInHandler {
			// percent of one thread × seconds = elapsed µs / 10_000; kept
			// in thousandths by Charge's division.
			chargeQuota(&b.quotas, rc, quota.Request, time.Since(start).Microseconds()/10)
		}
		return resp, err
	}
}

func isFollowerFetch(r *kmsg.FetchRequest) bool {
	return fetchReplicaID(r) >= 0
}
