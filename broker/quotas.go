package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// applyThrottle writes rc.throttleMs into resp's throttle_time_ms before
// the response is encoded (quotas, issue 9). Called by the connection for
// every response.
func (b *Broker) applyThrottle(rc *requestContext, resp kmsg.Response) {
	if rc.throttleMs <= 0 {
		return
	}
	if t, ok := resp.(interface{ SetThrottle(int32) }); ok {
		t.SetThrottle(rc.throttleMs)
	}
}
