package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier/objstore"
)

// TestTierUploadBound: with segments far too large to roll by size or age,
// a few committed records still reach the bucket within the bound; a topic
// that turns the bound off keeps them local; a quiet partition makes no
// more uploads; DescribeConfigs reports the broker's default.
func TestTierUploadBound(t *testing.T) {
	const bound = 4 * time.Second
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Tier.UploadMaxLag = bound
	})
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "bounded", 1, nil)
	createDataTopic(t, adm, "unbounded", 1, map[string]*string{"tier.upload.max.lag.ms": kadm.StringPtr("-1")})
	start := time.Now()
	produceTiered(t, tb.b, "bounded", 1, 0, 10)
	produceTiered(t, tb.b, "unbounded", 1, 0, 10)

	p, _ := tb.b.lookupPartition("bounded", 0)
	if st := tb.b.partitionTierStatus(p); !st.Leader || st.BucketLagBytes == 0 || st.UploadMaxLagMs != bound.Milliseconds() {
		t.Fatalf("before the roll the bucket lags: %+v", st)
	}
	waitUntil(t, 2*bound, func() bool {
		end, ok := p.manifest.ContiguousEnd(p.topicID, p.index)
		return ok && end == 10
	})
	if took := time.Since(start); took < bound/2 {
		t.Fatalf("uploaded after %v, before the roll was due (%v)", took, bound/2)
	}
	checkTiered(t, tb, mem, "bounded", 0)
	if st := tb.b.partitionTierStatus(p); st.BucketLagMs != 0 || st.BucketLagBytes != 0 || st.BucketEnd != 10 {
		t.Fatalf("after the upload the bucket is current: %+v", st)
	}
	if c := tb.b.TierCounters(); c.BoundRolls != 1 || c.SegmentsUploaded != 1 {
		t.Fatalf("counters %+v, want one roll and one upload", c)
	}

	// Quiet: nothing new, nothing rolled or uploaded.
	time.Sleep(bound)
	if c := tb.b.TierCounters(); c.BoundRolls != 1 || c.SegmentsUploaded != 1 {
		t.Fatalf("a quiet partition cost requests: %+v", c)
	}
	u, _ := tb.b.lookupPartition("unbounded", 0)
	if _, ok := u.manifest.ContiguousEnd(u.topicID, u.index); ok {
		t.Fatal("tier.upload.max.lag.ms=-1 uploaded the active segment")
	}
	if st := tb.b.partitionTierStatus(u); st.UploadMaxLagMs != -1 || st.BucketLagMs < bound.Milliseconds() {
		t.Fatalf("unbounded topic's status: %+v", st)
	}

	configs, err := adm.DescribeTopicConfigs(testCtx(t), "bounded")
	if err != nil {
		t.Fatal(err)
	}
	c, err := configs.On("bounded", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Configs {
		if e.Key == "tier.upload.max.lag.ms" {
			if e.MaybeValue() != "4000" {
				t.Fatalf("tier.upload.max.lag.ms described as %q, want the broker's 4000", e.MaybeValue())
			}
			return
		}
	}
	t.Fatal("tier.upload.max.lag.ms not described")
}
