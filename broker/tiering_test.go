package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier/objstore"
)

func tierTestConfig(store objstore.ObjectStore) func(*Config) {
	return func(c *Config) {
		c.DefaultPartitions = 1
		c.Durability = hotlog.DurabilityFsync
		c.ObjectStore = store
		c.RetentionCheckInterval = 50 * time.Millisecond
		c.Tier.UploadInterval = 50 * time.Millisecond
		c.Tier.RetryBackoff = 20 * time.Millisecond
		c.Tier.MaxRetryBackoff = 200 * time.Millisecond
	}
}

func TestTierDebug(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(mem))
	adm, _ := adminClient(t, tb.b)
	seg, local := "65536", "65536"
	createDataTopic(t, adm, "up", 1, map[string]*string{"internal.segment.bytes": &seg, "local.retention.bytes": &local})
	producer := newDataClient(t, tb.b, kgo.ProducerBatchMaxBytes(16<<10))
	for i := range 10 {
		produceSyncAll(t, producer, tierRecords("up", i*200, 200))
	}
	time.Sleep(2 * time.Second)
	t.Logf("%+v", tb.b.TierStatus(""))
	t.Logf("%+v", tb.b.TierCounters())
}

// tierRecords makes n records of 1000 incompressible-ish bytes, numbered from first.
func tierRecords(topic string, first, n int) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{Topic: topic, Value: tierValue(first + i)}
	}
	return out
}

func tierValue(i int) []byte {
	v := make([]byte, 1000)
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for j := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[j] = byte(x)
	}
	return v
}
