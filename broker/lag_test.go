package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/lag"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// The lag monitor reports a group's lag, how far behind in time it is
// (the timestamp of the record at its committed offset, read from the
// log) and its retention margin, and follows its commits.
func TestConsumerGroupLagSeries(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		fastGroups(c)
		c.ConsumerLagInterval = 50 * time.Millisecond
	})
	adm, cl := adminClient(t, tb.b)
	createDataTopic(t, adm, "lagged", 1, map[string]*string{"retention.ms": kmsg.StringPtr("3600000")})
	produceN(t, cl, "lagged", 10)
	before := time.Now()
	produceN(t, cl, "lagged", 10)
	commit := func(offset int64) {
		t.Helper()
		var o kadm.Offsets
		o.AddOffset("lagged", 0, offset, -1)
		resp, err := adm.CommitOffsets(testCtx(t), "lagging", o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", offset, err)
		}
	}
	commit(10)
	var s lag.Series
	testkit.WaitFor(t, 20*time.Second, "a series for the group at offset 10", func() bool {
		for _, x := range tb.b.ConsumerGroupLag() {
			if x.Group == "lagging" && x.Committed == 10 {
				s = x
				return true
			}
		}
		return false
	})
	if s.Topic != "lagged" || s.Partition != 0 || s.HighWatermark != 20 || s.Records != 10 {
		t.Fatalf("series %+v, want 10 records behind a high watermark of 20", s)
	}
	// The record at offset 10 was written after `before`.
	if maxBehind := time.Since(before).Seconds(); s.Seconds < 0 || s.Seconds > maxBehind+1 {
		t.Fatalf("%v s behind, want 0..%v", s.Seconds, maxBehind)
	}
	// The margin counts from the segment's newest record, which may be a
	// few milliseconds younger than the refresh's clock reading: the clock
	// is read before the refresh waits for the one before it to finish.
	if !s.Margin.Limited || s.Margin.Lost || s.Margin.Seconds < 3500 || s.Margin.Seconds > 3601 {
		t.Fatalf("margin %+v, want about an hour", s.Margin)
	}
	commit(20)
	testkit.WaitFor(t, 20*time.Second, "the series follows the commit", func() bool {
		for _, x := range tb.b.ConsumerGroupLag() {
			if x.Group == "lagging" {
				return x.Committed == 20 && x.Records == 0 && x.Seconds == 0
			}
		}
		return false
	})
}
