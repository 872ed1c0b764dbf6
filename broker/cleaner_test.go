package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier/objstore"
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
		c.Cleaner = compaction.CleanerConfig{Backoff: 50 * time.Millisecond, DedupeBufferBytes: 64 << 10}
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
	// Unique keys before the tombstones: with the 400 above they are more
	// distinct keys than the 64 KiB map holds (~2,450), so no pass can reach
	// the tombstones from offset 0, and the topic is compacted only after
	// several passes, however late the cleaner starts.
	fill := func(from, n int) {
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: "keyed", Key: []byte(fmt.Sprintf("fill-%05d", i)), Value: []byte("filler-value-" + fmt.Sprint(i))})
		}
	}
	fill(0, 3000)
	for i := range 50 { // delete 50 keys
		recs = append(recs, &kgo.Record{Topic: "keyed", Key: []byte(fmt.Sprintf("key-%03d", i*7))})
	}
	fill(3000, 2000) // unique keys that roll the tombstones out of the active segment
	m.produceKeyed(t, cl, recs)

	deadline := time.Now().Add(60 * time.Second)
	for why := m.check(t, tb.b, "keyed"); why != ""; why = m.check(t, tb.b, "keyed") {
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 60s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p, _ := tb.b.parts.lookup("keyed", 0)
	if p.cleaned.Totals().Passes < 2 {
		t.Fatalf("%d cleaning passes: the small map should have needed several", p.cleaned.Totals().Passes)
	}
	checkpoint := p.log.CleanerCheckpoint()
	empty := 0
	for _, s := range p.log.SealedSegments() {
		if s.Size == 0 {
			empty++
		}
	}
	// At most the segment at offset 0 (below the log start once emptied,
	// never rewritten) and the first of the last pass (a replacement keeps
	// its base) may be empty; the others were merged.
	if empty > 2 {
		t.Fatalf("%d empty sealed segments: cleaned segments should have been merged", empty)
	}

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

// TestCleanerTieredObjects: a tiered compacted topic whose history is
// mostly in the bucket converges to the latest record per key there too:
// objects are rewritten and merged, the manifest swaps them, the old
// objects are deleted after the grace period, and a reader scanning from
// offset 0 throughout never gets an error, an offset that goes backwards,
// or a record that was not produced at its offset.
func TestCleanerTieredObjects(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Cleaner = compaction.CleanerConfig{Backoff: 50 * time.Millisecond, DedupeBufferBytes: 64 << 10, ObjectDeleteGrace: 300 * time.Millisecond}
	})
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "tkeyed", 1, map[string]*string{
		"cleanup.policy": kmsg.StringPtr("compact"), "internal.segment.bytes": kmsg.StringPtr("16384"),
		"local.retention.bytes": kmsg.StringPtr("16384"), "min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
		"delete.retention.ms": kmsg.StringPtr("0"),
	})
	m := newKeyedModel()
	var recs []*kgo.Record
	for i := range 12000 {
		k := fmt.Sprintf("key-%03d", i%300)
		recs = append(recs, &kgo.Record{Topic: "tkeyed", Key: []byte(k), Value: []byte(fmt.Sprintf("%s-v%05d", k, i))})
	}
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "tkeyed", Key: []byte(fmt.Sprintf("key-%03d", i*9))})
	}
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Topic: "tkeyed", Key: []byte(fmt.Sprintf("fill-%05d", i)), Value: []byte("filler-value-" + fmt.Sprint(i))})
	}
	m.produceKeyed(t, newDataClient(t, tb.b, kgo.ProducerLinger(5*time.Millisecond)), recs)

	p, _ := tb.b.parts.lookup("tkeyed", 0)
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool { return p.localLogStartOffset() > 10000 })
	// A reader scans from 0 again and again while cleaning runs.
	stop := make(chan struct{})
	scans := make(chan error, 1)
	go func() { scans <- scanUntil(tb.b, "tkeyed", m, stop) }()
	deadline := time.Now().Add(60 * time.Second)
	for why := m.check(t, tb.b, "tkeyed"); why != ""; why = m.check(t, tb.b, "tkeyed") {
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 60s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	if err := <-scans; err != nil {
		t.Fatalf("concurrent reader: %v", err)
	}
	st := tb.b.TierStatus("tkeyed")
	if len(st) != 1 || !st[0].Compacted || !st[0].Tiered || st[0].CleanedTieredEnd <= st[0].TieredStart ||
		st[0].CleanerPasses == 0 || st[0].CleanedBytesOut >= st[0].CleanedBytesIn {
		t.Fatalf("tier status after cleaning: %+v", st)
	}
	// Old objects go after the grace period; what remains is what the
	// manifest names (and nothing it names is missing).
	testkit.WaitFor(t, 20*time.Second, "condition", func() bool {
		live := tb.b.manifest.Keys()
		objs, err := mem.List(testCtx(t), tb.store.Cluster()+"/topics/")
		if err != nil {
			t.Fatal(err)
		}
		segs := 0
		for _, o := range objs {
			if strings.HasSuffix(o.Key, ".seg") {
				segs++
				if _, ok := live[o.Key]; !ok {
					return false
				}
			}
		}
		return segs == len(live)
	})
	// A leader that forgot its bucket checkpoint (restart, new leader)
	// cleans again, finds nothing to change, and swaps nothing.
	keys := tb.b.manifest.Keys()
	passes := p.cleaned.Totals().Passes
	p.cleaned.SetTierCheckpoint(0)
	testkit.WaitFor(t, 20*time.Second, "condition", func() bool { return p.cleaned.Totals().Passes > passes })
	if after := tb.b.manifest.Keys(); fmt.Sprint(after) != fmt.Sprint(keys) {
		t.Fatalf("a pass over already clean objects replaced them: %d keys before, %d after", len(keys), len(after))
	}
}

// scanUntil reads the partition from offset 0 over and over until stop,
// checking every record against the model's produced values and that
// offsets increase within a scan.
func scanUntil(b *Broker, topic string, m *keyedModel, stop <-chan struct{}) error {
	for scan := 0; ; scan++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			return err
		}
		last := int64(-1)
		end := m.maxOffset()
		for last < end {
			select {
			case <-stop:
				cl.Close()
				return nil
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			fs := cl.PollFetches(ctx)
			cancel()
			if err := fs.Err(); err != nil {
				cl.Close()
				return fmt.Errorf("scan %d after offset %d: %w", scan, last, err)
			}
			for _, r := range fs.Records() {
				if r.Offset <= last || m.values[r.Offset] != string(r.Value) {
					cl.Close()
					return fmt.Errorf("scan %d: offset %d (after %d) holds %q", scan, r.Offset, last, r.Value)
				}
				last = r.Offset
			}
		}
		cl.Close()
	}
}

// TestCleanerCompactsConsumerOffsets: __consumer_offsets is compacted
// like any keyed topic: after thousands of commits of the same partitions
// its log stays small, and the committed offsets fetch correctly, also
// after a restart loads the group from the cleaned log.
func TestCleanerCompactsConsumerOffsets(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	dir := t.TempDir()
	cfg := func(c *Config) {
		fastGroups(c)
		c.Cleaner = compaction.CleanerConfig{Backoff: 50 * time.Millisecond}
	}
	tb := startTestBroker(t, endpoints, dir, cfg)
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "src", 2, nil)
	const group = "compacting-group"
	commit := func(off int64) {
		offs := make(kadm.Offsets)
		offs.Add(kadm.Offset{Topic: "src", Partition: 0, At: off, LeaderEpoch: -1})
		offs.Add(kadm.Offset{Topic: "src", Partition: 1, At: 2 * off, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(testCtx(t), group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", off, err)
		}
	}
	commit(0) // creates __consumer_offsets
	if _, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Name: "internal.segment.bytes", Value: kmsg.StringPtr("8192")},
		{Name: "min.cleanable.dirty.ratio", Value: kmsg.StringPtr("0.1")},
	}, "__consumer_offsets"); err != nil {
		t.Fatal(err)
	}
	const commits = 3000
	for i := int64(1); i <= commits; i++ {
		commit(i)
	}
	p, code := tb.b.parts.lookup("__consumer_offsets", tb.b.groups.PartitionFor(group))
	if code != 0 {
		t.Fatalf("offsets partition: code %d", code)
	}
	// 3000 commits of two partitions are ~300 KiB of records; cleaned, the
	// log holds the latest two plus the uncleanable tail.
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool { return p.log.Size() < 64<<10 })
	checkCommitted := func(adm *kadm.Client) {
		t.Helper()
		got, err := adm.FetchOffsets(testCtx(t), group)
		if err != nil {
			t.Fatal(err)
		}
		o0, _ := got.Lookup("src", 0)
		o1, _ := got.Lookup("src", 1)
		if o0.At != commits || o1.At != 2*commits {
			t.Fatalf("committed offsets %d and %d, want %d and %d", o0.At, o1.At, commits, 2*commits)
		}
	}
	checkCommitted(adm)
	tb.stop(t)
	tb = startTestBroker(t, endpoints, dir, cfg)
	adm, _ = adminClient(t, tb.b)
	checkCommitted(adm)
}
