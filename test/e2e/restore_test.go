package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// restoreRecord is one record as the restored cluster or replay shows it.
type restoreRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Key       *string `json:"key"`   // base64 in replay's JSON
	Value     *string `json:"value"` // base64 in replay's JSON
}

func (r restoreRecord) String() string {
	return fmt.Sprintf("p%d@%d ts %d key %s value %.40s", r.Partition, r.Offset, r.Timestamp, deref(r.Key), deref(r.Value))
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func b64(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

// restoreTopics are the acceptance test's topics: name -> partitions, compacted.
var restoreTopics = []struct {
	name       string
	partitions int32
	compact    bool
}{{"orders", 3, false}, {"events", 1, false}, {"users", 2, true}}

// TestRestoreAsOfIntoEmptyCluster: three topics (one
// compacted) in MinIO, two consumer groups committing as records flow;
// T lies between two phases. Everything stops; the broker's disk and its
// etcd data are deleted; a new, empty broker starts against the same
// bucket, and `strata restore --as-of T` rebuilds it: each topic holds
// exactly the tiered records with timestamp <= T (checked against what was
// produced, and against `strata replay --to T` of the bucket), each group
// resumes from its offset as of T, and new records continue at the
// restored end.
func TestRestoreAsOfIntoEmptyCluster(t *testing.T) {
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m, "--offsets-topic-num-partitions", "1")
	adm := b.Admin()
	for _, tp := range restoreTopics {
		cfg := map[string]string{"internal.segment.bytes": "16384", "retention.ms": "-1"}
		if tp.compact {
			cfg["cleanup.policy"] = "compact"
		}
		createTopic(t, adm, tp.name, tp.partitions, cfg)
	}
	w := newRestoreWorkload(t, b)
	w.commit() // creates __consumer_offsets; make it roll (and so tier) often
	alterTopicConfig(t, adm, "__consumer_offsets", "internal.segment.bytes", "4096")
	alterTopicConfig(t, adm, "__consumer_offsets", "segment.ms", "200")
	for range 6 {
		w.round()
	}
	time.Sleep(300 * time.Millisecond)
	asOf := time.UnixMilli(time.Now().UnixMilli())
	wantGroups := w.committedCopy()
	endOfCommits := topicEndOffsets(t, adm, "__consumer_offsets")
	// One batch per partition straddles T (its records stamped by the
	// producer around T), so the cut falls inside a batch.
	w.produceRound(func(i int) time.Time { return asOf.Add(time.Duration(i-19) * time.Millisecond) })
	endsAtT := topicEndOffsets(t, adm, w.topicNames()...)
	endsAtT["__consumer_offsets"] = endOfCommits["__consumer_offsets"]
	time.Sleep(300 * time.Millisecond)
	for range 6 {
		w.round()
	}
	testkit.WaitFor(t, 90*time.Second, "everything up to T tiered", func() bool {
		for topic, ends := range endsAtT {
			status := fetchTierStatus(t, b, topic)
			for p, end := range ends {
				if status[p].TieredEnd < end {
					return false
				}
			}
		}
		return true
	})
	if err := b.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The bucket's view as of T, read without any broker.
	fromBucket := map[string][]restoreRecord{}
	for _, tp := range restoreTopics {
		out := runReplayBinary(t, "replay", "--object-store", m.URL(tierBucketPrefix), "--cluster", b.Cluster,
			"--topic", tp.name, "--from", "0", "--to", fmt.Sprintf("ms:%d", asOf.UnixMilli()), "--format", "json")
		fromBucket[tp.name] = decodeReplayLines(t, out)
	}
	for _, tp := range restoreTopics {
		if !tp.compact {
			sameRecords(t, tp.name+" (replay of the bucket vs produced)", fromBucket[tp.name], w.producedUpTo(tp.name, asOf))
		}
	}

	wipeBroker(t, b)
	b.Start()
	out := runStrata(t, "restore", "--object-store", m.URL(tierBucketPrefix), "--cluster", b.Cluster,
		"--http", b.HTTPAddr, "--brokers", b.Addr, "--as-of", asOf.UTC().Format(time.RFC3339Nano))
	t.Logf("strata restore:\n%s", out)

	ends := topicEndOffsets(t, b.Admin(), w.topicNames()...)
	for _, tp := range restoreTopics {
		got := consumeRestored(t, b, tp.name, ends[tp.name])
		sameRecords(t, tp.name+" (restored vs bucket as of T)", got, fromBucket[tp.name])
		if !tp.compact {
			for p, end := range ends[tp.name] {
				if want := w.endAt(tp.name, p, asOf); end != want {
					t.Errorf("%s-%d: restored end %d, want %d (first offset after T)", tp.name, p, end, want)
				}
			}
		}
	}
	checkRestoredGroups(t, b, wantGroups)
	// New records continue at the restored end; a group member resumes at its offset.
	r := produceSync(t, b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())),
		&kgo.Record{Topic: "orders", Partition: 1, Value: []byte("after restore")})[0]
	if r.Offset != ends["orders"][1] {
		t.Fatalf("first record after the restore at offset %d, want %d", r.Offset, ends["orders"][1])
	}
	resumeGroup(t, b, "g-orders", "orders", wantGroups["g-orders"]["orders"])
	// The restored cluster's manifest matches the bucket; the old
	// incarnations' objects are kept, and named as such, not as orphans.
	out = runStrata(t, "tier", "verify", "--object-store", m.URL(tierBucketPrefix), "--http", b.HTTPAddr)
	if !strings.Contains(out, "\n0 problems") || !strings.Contains(out, "topic ids this cluster does not have") {
		t.Fatalf("tier verify after the restore:\n%s", out)
	}
}

// TestRestoreRebuildsLostIndex: a broker loses its etcd data and
// its disk; a new broker started on the same bucket keeps every object
// (the sweeper never deletes objects of topic ids etcd does not know, even
// past the orphan grace), and `strata restore` without --as-of rebuilds the
// same topic (same id) with every tiered record.
func TestRestoreRebuildsLostIndex(t *testing.T) {
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m, "--tier-orphan-grace", "1s", "--tier-sweep-interval", "200ms")
	createTopic(t, b.Admin(), "archive", 2, map[string]string{"internal.segment.bytes": "16384", "retention.ms": "-1"})
	w := newRestoreWorkload(t, b)
	w.topics = []string{"archive"}
	for range 4 {
		w.round()
	}
	idBefore := topicID(t, b.Admin(), "archive")
	var tieredEnd map[int32]int64
	testkit.WaitFor(t, 60*time.Second, "segments tiered", func() bool {
		if !allSealedUploaded(t, b, "archive", 2) {
			return false
		}
		tieredEnd = map[int32]int64{}
		for p, s := range fetchTierStatus(t, b, "archive") {
			tieredEnd[p] = s.TieredEnd
		}
		return tieredEnd[0] > 0 && tieredEnd[1] > 0
	})
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	wipeBroker(t, b)
	b.Start()
	time.Sleep(2 * time.Second) // past the orphan grace, several sweeps
	out := runStrata(t, "restore", "--object-store", m.URL(tierBucketPrefix), "--cluster", b.Cluster,
		"--http", b.HTTPAddr, "--brokers", b.Addr)
	t.Logf("strata restore:\n%s", out)
	if !strings.Contains(out, "not restorable") {
		t.Errorf("restore does not name the hot tail it could not restore:\n%s", out)
	}
	if id := topicID(t, b.Admin(), "archive"); id != idBefore {
		t.Fatalf("topic id %s after rebuilding the index, was %s", id, idBefore)
	}
	ends := topicEndOffsets(t, b.Admin(), "archive")
	var want []restoreRecord
	for p := range int32(2) {
		if ends["archive"][p] != tieredEnd[p] {
			t.Fatalf("archive-%d: end %d after the rebuild, want the tiered end %d", p, ends["archive"][p], tieredEnd[p])
		}
		for _, r := range w.produced["archive"] {
			if r.Partition == p && r.Offset < tieredEnd[p] {
				want = append(want, r)
			}
		}
	}
	sameRecords(t, "archive (rebuilt)", consumeRestored(t, b, "archive", ends["archive"]), want)

	// replay --to-brokers: the bucket's records produced into another topic.
	createTopic(t, b.Admin(), "archive-copy", 2, nil)
	out = runStrata(t, "replay", "--object-store", m.URL(tierBucketPrefix), "--cluster", b.Cluster, "--topic", "archive",
		"--from", "0", "--to-brokers", b.Addr, "--to-topic", "archive-copy")
	if !strings.Contains(out, fmt.Sprintf("produced %d records into archive-copy", len(want))) {
		t.Fatalf("replay --to-brokers: %s", out)
	}
	sameRecords(t, "archive-copy (replayed into the cluster)", consumeRestored(t, b, "archive-copy", ends["archive"]), want)
}

// restoreWorkload produces to the topics and commits for two groups.
type restoreWorkload struct {
	t         *testing.T
	b         *Broker
	cl        *kgo.Client
	adm       *kadm.Client
	topics    []string
	seq       int
	produced  map[string][]restoreRecord            // by topic, in produce order
	committed map[string]map[string]map[int32]int64 // group -> topic -> partition -> offset
	groups    map[string][]string                   // group -> topics
}

func newRestoreWorkload(t *testing.T, b *Broker) *restoreWorkload {
	return &restoreWorkload{t: t, b: b, adm: b.Admin(),
		cl:     b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression())),
		topics: []string{"orders", "events", "users"}, produced: map[string][]restoreRecord{},
		committed: map[string]map[string]map[int32]int64{},
		groups:    map[string][]string{"g-orders": {"orders"}, "g-mixed": {"events", "users"}}}
}

func (w *restoreWorkload) topicNames() []string { return w.topics }

// round produces 40 records to every partition, commits, and pauses (so
// that __consumer_offsets, with segment.ms 200, rolls at the next commit).
func (w *restoreWorkload) round() {
	w.produceRound(nil)
	w.commit()
	time.Sleep(250 * time.Millisecond)
}

// produceRound produces one batch of 40 records to every partition of
// every topic; stamp(i), if given, stamps a partition's i-th record.
func (w *restoreWorkload) produceRound(stamp func(i int) time.Time) {
	for _, topic := range w.topics {
		parts := restorePartitions(topic)
		var rs []*kgo.Record
		for i := range 40 * int(parts) {
			w.seq++
			key := fmt.Appendf(nil, "key-%d", w.seq)
			if topic == "users" {
				key = fmt.Appendf(nil, "user-%d", w.seq%30)
			}
			r := &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: key,
				Value: fmt.Appendf(nil, "%s-%06d-%s", topic, w.seq, strings.Repeat("v", 200))}
			if stamp != nil {
				r.Timestamp = stamp(i / int(parts))
			}
			rs = append(rs, r)
		}
		for _, r := range produceSync(w.t, w.cl, rs...) {
			w.produced[topic] = append(w.produced[topic], restoreRecord{Partition: r.Partition, Offset: r.Offset,
				Timestamp: r.Timestamp.UnixMilli(), Key: b64(r.Key), Value: b64(r.Value)})
		}
	}
}

// commit commits, for each group, a position 10 records behind each end.
func (w *restoreWorkload) commit() {
	ctx := testCtx(w.t, 30*time.Second)
	for g, topics := range w.groups {
		if !containsAll(w.topics, topics) {
			continue
		}
		offsets := kadm.Offsets{}
		for _, topic := range topics {
			for p := range restorePartitions(topic) {
				at := max(w.endNow(topic, p)-10, 0)
				offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
				if w.committed[g] == nil {
					w.committed[g] = map[string]map[int32]int64{}
				}
				if w.committed[g][topic] == nil {
					w.committed[g][topic] = map[int32]int64{}
				}
				w.committed[g][topic][p] = at
			}
		}
		resp, err := w.adm.CommitOffsets(ctx, g, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			w.t.Fatalf("commit %s: %v", g, err)
		}
	}
}

func containsAll(have, want []string) bool {
	for _, x := range want {
		found := false
		for _, h := range have {
			found = found || h == x
		}
		if !found {
			return false
		}
	}
	return true
}

func restorePartitions(topic string) int32 {
	for _, tp := range restoreTopics {
		if tp.name == topic {
			return tp.partitions
		}
	}
	return 2 // "archive"
}

func (w *restoreWorkload) endNow(topic string, p int32) int64 {
	end := int64(0)
	for _, r := range w.produced[topic] {
		if r.Partition == p {
			end = max(end, r.Offset+1)
		}
	}
	return end
}

// endAt is the offset of partition p's first record stamped after asOf.
func (w *restoreWorkload) endAt(topic string, p int32, asOf time.Time) int64 {
	end := int64(0)
	for _, r := range w.producedUpTo(topic, asOf) {
		if r.Partition == p {
			end = r.Offset + 1
		}
	}
	return end
}

// producedUpTo: the records of topic, partition by partition in offset
// order, up to the first stamped after asOf (timestamps grow with offsets).
func (w *restoreWorkload) producedUpTo(topic string, asOf time.Time) []restoreRecord {
	var out []restoreRecord
	for p := range restorePartitions(topic) {
		for _, r := range w.produced[topic] {
			if r.Partition == p && r.Timestamp <= asOf.UnixMilli() {
				out = append(out, r)
			}
		}
	}
	return out
}

func (w *restoreWorkload) committedCopy() map[string]map[string]map[int32]int64 {
	out := map[string]map[string]map[int32]int64{}
	for g, topics := range w.committed {
		out[g] = map[string]map[int32]int64{}
		for topic, parts := range topics {
			out[g][topic] = map[int32]int64{}
			for p, o := range parts {
				out[g][topic][p] = o
			}
		}
	}
	return out
}

func topicEndOffsets(t *testing.T, adm *kadm.Client, topics ...string) map[string]map[int32]int64 {
	t.Helper()
	listed, err := adm.ListEndOffsets(testCtx(t, 30*time.Second), topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %v: %v", topics, err)
	}
	out := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out
}

func topicID(t *testing.T, adm *kadm.Client, topic string) string {
	t.Helper()
	d, err := adm.ListTopics(testCtx(t, 30*time.Second), topic)
	if err != nil || d[topic].Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, d[topic].Err)
	}
	return fmt.Sprint(d[topic].ID)
}

// wipeBroker deletes the stopped broker's disk and its cluster's etcd data.
func wipeBroker(t *testing.T, b *Broker) {
	t.Helper()
	if err := os.RemoveAll(b.DataDir); err != nil {
		t.Fatal(err)
	}
	if etcdMode != "external" {
		return // embedded etcd lived in the data dir
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Delete(testCtx(t, 10*time.Second), "/strata/"+b.Cluster+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}

func decodeReplayLines(t *testing.T, out string) []restoreRecord {
	t.Helper()
	var recs []restoreRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r restoreRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("replay line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// consumeRestored reads every record of topic below ends, partition by
// partition in offset order.
func consumeRestored(t *testing.T, b *Broker, topic string, ends map[int32]int64) []restoreRecord {
	t.Helper()
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range ends {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl := b.Client(kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(200*time.Millisecond))
	byPart := map[int32][]restoreRecord{}
	ctx := testCtx(t, 60*time.Second)
	done := func() bool {
		for p, end := range ends {
			n := len(byPart[p])
			if end > 0 && (n == 0 || byPart[p][n-1].Offset < end-1) {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming restored %s: %v (have %d/%d/%d records)", topic, ctx.Err(), len(byPart[0]), len(byPart[1]), len(byPart[2]))
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("consume %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				byPart[r.Partition] = append(byPart[r.Partition], restoreRecord{Partition: r.Partition, Offset: r.Offset,
					Timestamp: r.Timestamp.UnixMilli(), Key: b64(r.Key), Value: b64(r.Value)})
			}
		})
	}
	var out []restoreRecord
	for p := range int32(len(ends)) {
		out = append(out, byPart[p]...)
	}
	return out
}

// sameRecords compares two record lists, partition by partition in offset order.
func sameRecords(t *testing.T, what string, got, want []restoreRecord) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: nothing expected: the test would check nothing", what)
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			t.Fatalf("%s: %d records, want %d; first missing %v", what, len(got), len(want), want[i])
		case i >= len(want):
			t.Fatalf("%s: %d records, want %d; first extra %v", what, len(got), len(want), got[i])
		case got[i].String() != want[i].String():
			t.Fatalf("%s: record %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func checkRestoredGroups(t *testing.T, b *Broker, want map[string]map[string]map[int32]int64) {
	t.Helper()
	adm := b.Admin()
	for g, topics := range want {
		fetched, err := adm.FetchOffsets(testCtx(t, 30*time.Second), g)
		if err == nil {
			err = fetched.Error()
		}
		if err != nil {
			t.Fatalf("fetch offsets of %s: %v", g, err)
		}
		n := 0
		fetched.Each(func(o kadm.OffsetResponse) {
			n++
			if w, ok := topics[o.Topic][o.Partition]; !ok || o.At != w {
				t.Errorf("group %s %s-%d: restored offset %d, want %d (as of T)", g, o.Topic, o.Partition, o.At, w)
			}
		})
		wantN := 0
		for _, parts := range topics {
			wantN += len(parts)
		}
		if n != wantN {
			t.Errorf("group %s: %d offsets restored, want %d", g, n, wantN)
		}
	}
}

// resumeGroup joins group on topic and checks each partition's first
// record is at the restored offset.
func resumeGroup(t *testing.T, b *Broker, g, topic string, want map[int32]int64) {
	t.Helper()
	cl := b.Client(kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	first := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(first) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s resumed %d of %d partitions", g, len(first), len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	for p, off := range want {
		if first[p] != off {
			t.Errorf("group %s resumed %s-%d at %d, want %d", g, topic, p, first[p], off)
		}
	}
}
