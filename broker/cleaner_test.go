package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata/metadatatest"
)

// keyedModel is what a compacted topic must converge to: the offset of
// each key's latest record, and whether that record is a tombstone.
type keyedModel struct {
	latest  map[string]int64
	deleted map[string]bool
	values  map[int64]string
}

func newKeyedModel() *keyedModel {
	return &keyedModel{latest: map[string]int64{}, deleted: map[string]bool{}, values: map[int64]string{}}
}

// produceKeyed writes records in batches and records their offsets.
func (m *keyedModel) produceKeyed(t *testing.T, cl *kgo.Client, records []*kgo.Record) {
	t.Helper()
	for len(records) > 0 {
		n := min(len(records), 2000)
		res := cl.ProduceSync(testCtx(t), records[:n]...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range res {
			k := string(r.Record.Key)
			m.latest[k] = r.Record.Offset
			m.deleted[k] = r.Record.Value == nil
			m.values[r.Record.Offset] = string(r.Record.Value)
		}
		records = records[n:]
	}
}

// check reads the whole partition and compares it with the model: every
// record is its key's latest (at its original offset, with its value), no
// deleted key remains, and every live key is present. It returns a reason
// when the log has not converged yet.
func (m *keyedModel) check(t *testing.T, b *Broker, topic string) string {
	t.Helper()
	cl := newDataClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	end := m.maxOffset() + 1
	seen := map[string]bool{}
	last := int64(-1)
	for last+1 < end {
		ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if ctx.Err() != nil && fs.NumRecords() == 0 {
			break
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		for _, r := range fs.Records() {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			if want, ok := m.values[r.Offset]; !ok || want != string(r.Value) {
				t.Fatalf("offset %d holds %q, produced %q (%v)", r.Offset, r.Value, want, ok)
			}
			k := string(r.Key)
			if m.latest[k] != r.Offset || m.deleted[k] {
				return fmt.Sprintf("offset %d: key %s superseded at %d (deleted %v)", r.Offset, k, m.latest[k], m.deleted[k])
			}
			seen[k] = true
		}
	}
	for k, off := range m.latest {
		if !m.deleted[k] && !seen[k] {
			t.Fatalf("live key %s (latest at %d) is missing", k, off)
		}
	}
	return ""
}

func (m *keyedModel) maxOffset() int64 {
	max := int64(-1)
	for _, off := range m.latest {
		if off > max {
			max = off
		}
	}
	return max
}

// TestCleanerCompactsKeyedTopic: many versions of a few hundred keys, some
// deleted by tombstones, over many small segments, cleaned with an offset
// map too small for the dirty range (several passes): the log converges to
// the latest record of each live key at its original offset, tombstones
// past delete.retention.ms are gone, and offsets only increase. A restart
// keeps the cleaned log and the cleaner checkpoint.
func TestCleanerCompactsKeyedTopic(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	dir := t.TempDir()
	fast := func(c *Config) {
		c.Cleaner = CleanerConfig{Backoff: 50 * time.Millisecond, DedupeBufferBytes: 64 << 10}
	}
	tb := startTestBroker(t, endpoints, dir, fast)
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "keyed", 1, map[string]*string{
		"cleanup.policy": kmsg.StringPtr("compact"), "internal.segment.bytes": kmsg.StringPtr("16384"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"), "delete.retention.ms": kmsg.StringPtr("0"),
	})
	cl := newDataClient(t, tb.b, kgo.ProducerLinger(5*time.Millisecond))
	m := newKeyedModel()
	var recs []*kgo.Record
	for i := range 20000 {
		k := fmt.Sprintf("key-%03d", i%400)
		recs = append(recs, &kgo.Record{Topic: "keyed", Key: []byte(k), Value: []byte(fmt.Sprintf("%s-v%05d", k, i))})
	}
	for i := range 50 { // delete 50 keys
		recs = append(recs, &kgo.Record{Topic: "keyed", Key: []byte(fmt.Sprintf("key-%03d", i*7))})
	}
	for i := range 2000 { // unique keys that fill (and roll past) the active segment
		recs = append(recs, &kgo.Record{Topic: "keyed", Key: []byte(fmt.Sprintf("fill-%05d", i)), Value: []byte("filler-value-" + fmt.Sprint(i))})
	}
	m.produceKeyed(t, cl, recs)

	deadline := time.Now().Add(60 * time.Second)
	for why := m.check(t, tb.b, "keyed"); why != ""; why = m.check(t, tb.b, "keyed") {
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 60s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p, _ := tb.b.lookupPartition("keyed", 0)
	if p.cleaned.passes.Load() < 2 {
		t.Fatalf("%d cleaning passes: the small map should have needed several", p.cleaned.passes.Load())
	}
	checkpoint := p.log.CleanerCheckpoint()

	tb.stop(t)
	tb = startTestBroker(t, endpoints, dir, fast)
	if why := m.check(t, tb.b, "keyed"); why != "" {
		t.Fatalf("after a restart: %s", why)
	}
	p = waitLookup(t, tb.b, "keyed", 0)
	if got := p.log.CleanerCheckpoint(); got < checkpoint {
		t.Fatalf("cleaner checkpoint %d after the restart, was %d", got, checkpoint)
	}
}
