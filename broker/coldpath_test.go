package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

const (
	coldTopic   = "cold"
	coldRecords = 3000
	coldValue   = 1000
)

var coldBaseTime = time.UnixMilli(1_700_000_000_000)

// coldValueOf is record i's value: distinct, incompressible (the client
// compresses), 1000 bytes, so that 3000 records fill about a dozen 256 KiB
// segments.
func coldValueOf(i int) []byte {
	v := make([]byte, coldValue)
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for j := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[j] = byte(x)
	}
	copy(v, fmt.Sprintf("record-%06d|", i))
	return v
}

func coldBrokerConfig(store tier.ObjectStore) func(*Config) {
	return func(c *Config) {
		c.DefaultPartitions = 1
		c.Durability = hotlog.DurabilityFsync
		c.ObjectStore = store
		c.RetentionCheckInterval = 100 * time.Millisecond
		c.Tier.UploadInterval = 100 * time.Millisecond
		c.Cold = tier.ColdConfig{FetchSize: 1 << 20, CacheBytes: 16 << 20}
	}
}

// produceColdHistory creates the topic with small segments and a small
// local retention, produces coldRecords records and waits until most of
// them are only in the bucket.
func produceColdHistory(t *testing.T, b *Broker) {
	t.Helper()
	adm, _ := adminClient(t, b)
	// retention.ms -1: the records' timestamps are from 2023, and remote
	// retention would otherwise delete them from the bucket.
	seg, local, forever := "262144", "262144", "-1"
	createDataTopic(t, adm, coldTopic, 1, map[string]*string{"internal.segment.bytes": &seg, "local.retention.bytes": &local,
		"retention.ms": &forever})
	producer := newDataClient(t, b, kgo.ProducerBatchMaxBytes(64<<10))
	records := make([]*kgo.Record, coldRecords)
	for i := range records {
		records[i] = &kgo.Record{Topic: coldTopic, Value: coldValueOf(i), Timestamp: coldBaseTime.Add(time.Duration(i) * time.Millisecond)}
	}
	for i := 0; i < len(records); i += 100 {
		produceSyncAll(t, producer, records[i:i+100])
	}
	p, code := b.parts.lookup(coldTopic, 0)
	if code != 0 {
		t.Fatalf("lookup: %d", code)
	}
	deadline := time.Now().Add(60 * time.Second)
	for p.localLogStartOffset() <= coldRecords/2 {
		if time.Now().After(deadline) {
			t.Fatalf("history not tiered: local start %d, %d manifest entries, sealed %d, counters %+v, last upload error %q",
				p.localLogStartOffset(), len(p.manifest.Segments(p.topicID, p.index)), len(p.log.SealedSegments()),
				b.TierCounters(), b.partitionTierStatus(p).LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Let the uploader and local retention settle, so the offsets checked
	// next do not move under the checks.
	testkit.WaitFor(t, 60*time.Second, "condition", func() bool { return len(b.tiering.PendingSegments(tierPartition{p, b})) == 0 })
	for prev := int64(-1); prev != p.localLogStartOffset(); time.Sleep(300 * time.Millisecond) {
		prev = p.localLogStartOffset()
	}
}

// consumeColdFromStart reads every record from offset 0 and checks each
// against what was produced.
func consumeColdFromStart(t *testing.T, b *Broker) {
	t.Helper()
	cl := newDataClient(t, b, kgo.ConsumeTopics(coldTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := 0
	for next < coldRecords {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || !bytes.Equal(r.Value, coldValueOf(next)) ||
				!r.Timestamp.Equal(coldBaseTime.Add(time.Duration(next)*time.Millisecond)) {
				t.Fatalf("record %d: offset %d value %.14q ts %v", next, r.Offset, r.Value, r.Timestamp)
			}
			next++
		})
	}
}

// TestColdReadsAcrossRestart: most data only in the bucket; a consumer from
// offset 0 reads every record exactly; ListOffsets and OffsetForLeaderEpoch
// span both tiers; all of it again after a restart with an empty cache.
func TestColdReadsAcrossRestart(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	dir := t.TempDir()
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, endpoints, dir, coldBrokerConfig(mem))
	produceColdHistory(t, tb.b)
	consumeColdFromStart(t, tb.b)
	if st := tb.b.ColdStats(); st.Gets == 0 || st.GetBytes == 0 || st.CorruptBlocks != 0 {
		t.Fatalf("cold stats after catch-up: %+v", st)
	}
	checkColdOffsets(t, tb.b)
	tb.stop(t)

	again := startTestBroker(t, endpoints, dir, coldBrokerConfig(mem))
	p := waitLookup(t, again.b, coldTopic, 0)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.logStartOffset() == 0 }) // manifest loaded
	checkColdOffsets(t, again.b)
	consumeColdFromStart(t, again.b)
}

func checkColdOffsets(t *testing.T, b *Broker) {
	t.Helper()
	_, cl := adminClient(t, b)
	p, _ := b.parts.lookup(coldTopic, 0)
	local := p.localLogStartOffset()
	entries := p.manifest.Segments(p.topicID, p.index)
	if len(entries) == 0 || local == 0 {
		t.Fatalf("nothing tiered: %d entries, local start %d", len(entries), local)
	}
	ms := coldBaseTime.UnixMilli()
	tests := []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTS     int64
	}{
		{"earliest across tiers", -2, 0, -1},
		{"earliest local", -4, local, -1},
		{"latest tiered", -5, entries[len(entries)-1].LastOffset, -1},
		{"latest", -1, coldRecords, -1},
		{"max timestamp", -3, coldRecords - 1, ms + coldRecords - 1},
		{"timestamp in the bucket", ms + 10, 10, ms + 10},
		{"timestamp at the local start", ms + local, local, ms + local},
		{"timestamp before all", ms - 5, 0, ms},
		{"timestamp after all", ms + coldRecords, -1, -1},
	}
	for _, tt := range tests {
		sp := listOneOffset(t, cl, coldTopic, tt.ts, -1)
		if sp.ErrorCode != 0 || sp.Offset != tt.wantOffset || sp.Timestamp != tt.wantTS {
			t.Errorf("%s: error %d offset %d ts %d, want %d %d", tt.name, sp.ErrorCode, sp.Offset, sp.Timestamp, tt.wantOffset, tt.wantTS)
		}
	}
	// Every batch was written in the partition's only epoch, which ends at the LEO.
	epoch := p.leaderEpoch()
	got := epochEndOffsetDirect(t, cl, epoch)
	if got.ErrorCode != 0 || got.LeaderEpoch != epoch || got.EndOffset != coldRecords {
		t.Errorf("offset for leader epoch %d: %+v", epoch, got)
	}
}

func epochEndOffsetDirect(t *testing.T, cl *kgo.Client, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = coldTopic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.ReplicaID = -1
	return requestDirect(t, cl, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
}

// fetchOne sends a raw single-partition fetch.
func fetchOne(t *testing.T, cl *kgo.Client, id [16]byte, offset int64, maxWait int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWait, 1, 10<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = coldTopic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return requestDirect(t, cl, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// TestColdCorruptObjectNotServed: a flipped byte in a tiered object gives
// KAFKA_STORAGE_ERROR for that partition and no records; it is counted.
func TestColdCorruptObjectNotServed(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), coldBrokerConfig(mem))
	produceColdHistory(t, tb.b)
	p, _ := tb.b.parts.lookup(coldTopic, 0)
	victim := p.manifest.Segments(p.topicID, p.index)[1]
	if !mem.Corrupt(victim.Key, 100, 0x01) {
		t.Fatal("corrupt failed")
	}
	_, cl := adminClient(t, tb.b)
	sp := fetchOne(t, cl, p.topicID, victim.BaseOffset, 1000)
	if sp.ErrorCode != kerr.KafkaStorageError.Code || len(sp.RecordBatches) != 0 {
		t.Fatalf("fetch of a corrupt object: error %d, %d bytes", sp.ErrorCode, len(sp.RecordBatches))
	}
	if st := tb.b.ColdStats(); st.CorruptBlocks == 0 {
		t.Fatalf("corruption not counted: %+v", st)
	}
	// Another object still reads.
	if sp := fetchOne(t, cl, p.topicID, 0, 1000); sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 {
		t.Fatalf("fetch of an intact object: error %d, %d bytes", sp.ErrorCode, len(sp.RecordBatches))
	}
}

// TestColdIsolation: while one consumer reads the whole history from the
// bucket and another tails the hot log, no hot segment file is opened
// (/proc/self/fd is watched) and the active segment stays resident.
func TestColdIsolation(t *testing.T) {
	mem := objstore.NewMemStore()
	dir := t.TempDir()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), dir, coldBrokerConfig(mem))
	produceColdHistory(t, tb.b)
	p, _ := tb.b.parts.lookup(coldTopic, 0)
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool { return len(tb.b.tiering.PendingSegments(tierPartition{p, tb.b})) == 0 }) // uploader idle
	partDir := tb.b.parts.partitionDir(coldTopic, 0)
	before := openLogFiles(t, partDir)
	var opened atomic.Value
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for path := range openLogFiles(t, partDir) {
				if _, ok := before[path]; !ok {
					opened.Store(path)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	tail := newDataClient(t, tb.b, kgo.ConsumeTopics(coldTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	tailCtx, cancelTail := context.WithCancel(context.Background())
	go func() {
		for tailCtx.Err() == nil {
			tail.PollFetches(tailCtx)
		}
	}()
	consumeColdFromStart(t, tb.b)
	cancelTail()
	close(stop)
	<-watched
	if path := opened.Load(); path != nil {
		t.Fatalf("a segment file was opened during the cold catch-up: %s", path)
	}
	active := activeSegmentPath(t, partDir)
	if resident, total := residentPages(t, active); resident != total {
		t.Fatalf("active segment %s: %d of %d pages resident", active, resident, total)
	}
}

// openLogFiles lists the .log files under dir that this process has open.
func openLogFiles(t *testing.T, dir string) map[string]struct{} {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("isolation check needs /proc/self/fd: %v", err)
	}
	out := map[string]struct{}{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.HasSuffix(target, ".log") {
			out[target] = struct{}{}
		}
	}
	return out
}

func activeSegmentPath(t *testing.T, dir string) string {
	matches, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	return matches[len(matches)-1] // zero-padded names: the last is the active one
}

// residentPages maps path and asks mincore which pages are in memory.
func residentPages(t *testing.T, path string) (resident, total int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		t.Fatalf("stat %s: %v (size %d)", path, err, info.Size())
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, (len(data)+os.Getpagesize()-1)/os.Getpagesize())
	// x/sys/unix has no Mincore wrapper: the raw system call.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			resident++
		}
	}
	return resident, len(vec)
}

// TestColdOffsetForLeaderEpochAcrossTiers: epochs whose batches now live
// only in the bucket are still answered: epoch e ends where e+1 starts.
func TestColdOffsetForLeaderEpochAcrossTiers(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), coldBrokerConfig(mem))
	adm, cl := adminClient(t, tb.b)
	seg, local, forever := "262144", "262144", "-1"
	id := createDataTopic(t, adm, coldTopic, 1, map[string]*string{"internal.segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &forever})
	producer := newDataClient(t, tb.b, kgo.ProducerBatchMaxBytes(64<<10))
	p, _ := tb.b.parts.lookup(coldTopic, 0)
	const epochs, perEpoch = 4, 600
	var starts [epochs + 1]int64
	for e := 0; e < epochs; e++ {
		if e > 0 {
			bumpLeaderEpoch(t, tb, id, p)
		}
		starts[e] = p.log.LogEndOffset()
		records := make([]*kgo.Record, perEpoch)
		for i := range records {
			records[i] = &kgo.Record{Topic: coldTopic, Value: coldValueOf(e*perEpoch + i)}
		}
		produceSyncAll(t, producer, records)
	}
	starts[epochs] = p.log.LogEndOffset()
	testkit.WaitFor(t, 60*time.Second, "condition", func() bool { return p.localLogStartOffset() > starts[2] })
	first := p.leaderEpoch() - epochs + 1
	for e := 0; e < epochs; e++ {
		got := epochEndOffsetDirect(t, cl, first+int32(e))
		if got.ErrorCode != 0 || got.LeaderEpoch != first+int32(e) || got.EndOffset != starts[e+1] {
			t.Errorf("epoch %d: %+v, want end offset %d (starts %v, local start %d)", first+int32(e), got, starts[e+1], starts, p.localLogStartOffset())
		}
	}
	// The first epochs' answers came from the bucket, not the hot log.
	for e := 0; e < 2; e++ {
		if _, _, inBucket, err := tb.b.coldSrc.EpochEndOffset(testCtx(t), tp(p), p.localLogStartOffset(), first+int32(e)); !inBucket || err != nil {
			t.Errorf("epoch %d not answered from the bucket: %v", first+int32(e), err)
		}
	}
	hotEpoch, hotEnd := p.log.EndOffsetForEpoch(first)
	t.Logf("hot log alone answers epoch %d with (%d, %d)", first, hotEpoch, hotEnd)
}

// bumpLeaderEpoch raises the partition's leader epoch in metadata (as a
// re-election would) and waits for the broker to apply it.
func bumpLeaderEpoch(t *testing.T, tb *testBroker, id [16]byte, p *partition) {
	t.Helper()
	states, err := tb.store.PartitionStates(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	st := states[0]
	st.LeaderEpoch++
	if _, err := tb.store.CASPartitionState(testCtx(t), id, 0, st); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.leaderEpoch() == st.LeaderEpoch })
}
