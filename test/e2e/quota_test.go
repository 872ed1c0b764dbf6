package e2e

import (
	"crypto/rand"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// throttleCounter is a kgo hook counting responses that carried a
// throttle_time_ms.
type throttleCounter struct{ n atomic.Int64 }

func (h *throttleCounter) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestProduceQuota: a producer whose client id has
// producer_byte_rate Q, set through AlterClientQuotas (the strata CLI),
// sends as fast as it can for 30 s; the byte rate it achieves, measured
// from the bytes acknowledged over the elapsed time, is within 10% of Q.
// This checks a rate the issue specifies, not speed.
func TestProduceQuota(t *testing.T) {
	const (
		quota     = 256 << 10 // bytes per second
		valueSize = 8 << 10
		clientID  = "quota-e2e-producer"
		topic     = "quota-e2e"
		duration  = 30 * time.Second
	)
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, topic, 1, nil)
	runStrata(t, "quota", "set", "--brokers", b.Addr, "--client-id", clientID,
		"--producer-byte-rate", strconv.Itoa(quota))
	out := runStrata(t, "quota", "describe", "--brokers", b.Addr, "--client-id", clientID)
	if !strings.Contains(out, "producer_byte_rate="+strconv.Itoa(quota)) {
		t.Fatalf("strata quota describe does not show the quota:\n%s", out)
	}
	checkDescribedQuota(t, adm, clientID, quota)

	throttles := &throttleCounter{}
	cl := b.Client(kgo.ClientID(clientID), kgo.WithHooks(throttles),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(64))
	value := make([]byte, valueSize)
	_, _ = rand.Read(value)
	ctx := testCtx(t, duration+time.Minute)
	var acked atomic.Int64
	start := time.Now()
	deadline := start.Add(duration)
	var ackedAtDeadline int64
	for time.Now().Before(deadline) {
		// MaxBufferedRecords makes Produce block while 64 records wait:
		// the loop offers load as fast as the broker takes it.
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
			if err == nil && time.Now().Before(deadline) {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	elapsed := time.Since(start)
	ackedAtDeadline = acked.Load()
	rate := float64(ackedAtDeadline) / elapsed.Seconds()
	t.Logf("acknowledged %d bytes in %v: %.0f B/s against a quota of %d B/s; %d throttled responses",
		ackedAtDeadline, elapsed.Round(time.Millisecond), rate, quota, throttles.n.Load())
	if throttles.n.Load() == 0 {
		t.Error("no response carried throttle_time_ms: the producer was never throttled")
	}
	if math.Abs(rate-quota)/quota > 0.10 {
		t.Errorf("achieved %.0f B/s, want within 10%% of the quota %d B/s", rate, quota)
	}
	cl.PurgeTopicsFromProducing(topic) // do not wait out the throttle at cleanup
}

// checkDescribedQuota reads the quota back through DescribeClientQuotas.
func checkDescribedQuota(t *testing.T, adm *kadm.Client, clientID string, quota float64) {
	t.Helper()
	name := clientID
	got, err := adm.DescribeClientQuotas(testCtx(t, 30*time.Second), true,
		[]kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Values) != 1 || got[0].Values[0].Key != "producer_byte_rate" || got[0].Values[0].Value != quota {
		t.Fatalf("described quotas %v, want client-id=%s producer_byte_rate=%v", got, clientID, quota)
	}
}
