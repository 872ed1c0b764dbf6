package broker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// TestWatchAppliesOutsideChanges: topics created, altered and deleted in
// metadata by someone else (another broker, the CLI) reach this broker.
func TestWatchAppliesOutsideChanges(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	tb := startTestBroker(t, endpoints, t.TempDir(), nil)
	ctx := testCtx(t)
	other, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "ext", Replicas: [][]int32{{1}, {1}}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the topic to open", func() bool { _, code := tb.b.parts.lookup("ext", 1); return code == 0 })

	if _, err := other.AlterTopicConfigs(ctx, "ext", func(m map[string]string) error {
		m["retention.ms"] = "4242"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the config change", func() bool {
		p, code := tb.b.parts.lookup("ext", 0)
		return code == 0 && p.config().RetentionMs == 4242
	})

	if _, err := other.AddPartitions(ctx, "ext", [][]int32{{1}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the new partition", func() bool { _, code := tb.b.parts.lookup("ext", 2); return code == 0 })

	if err := other.DeleteTopic(ctx, "ext"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the deletion", func() bool {
		_, code := tb.b.parts.lookup("ext", 0)
		_, statErr := os.Stat(filepath.Join(tb.b.cfg.DataDir, "ext-0"))
		return code == kerr.UnknownTopicOrPartition.Code && os.IsNotExist(statErr)
	})
}

// TestRetentionLoopDeletesOldSegments: with tiny segments and a small
// retention.bytes the retention loop moves the log start offset.
func TestRetentionLoopDeletesOldSegments(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		c.RetentionCheckInterval = 50 * time.Millisecond
	})
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)
	configs := map[string]*string{"internal.segment.bytes": kmsg.StringPtr("1024"), "retention.bytes": kmsg.StringPtr("2048")}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, "short"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.DefaultProduceTopic("short"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 200)
	for i := 0; i < 60; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	p, code := tb.b.parts.lookup("short", 0)
	if code != 0 {
		t.Fatalf("lookup: %d", code)
	}
	testkit.WaitFor(t, 20*time.Second, "retention to delete segments", func() bool { return p.log.LogStartOffset() > 0 })
	if size := p.log.Size(); size > 2048+4096 {
		t.Fatalf("log still holds %d bytes", size)
	}
	if hw := p.highWatermark(); hw != 60 {
		t.Fatalf("high watermark %d, want 60", hw)
	}
}
