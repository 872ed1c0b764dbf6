package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

const restoreTopic = "orders.v1"

var restoreNewID = metadata.TopicID{9, 9, 9, 9, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 99}

// rBatch describes one test batch: records at base, base+1, ... with the
// given timestamps (CreateTime), or a transaction marker when marker.
type rBatch struct {
	base   int64
	epoch  int32
	stamps []int64
	codec  int
	pid    int64 // 0: no producer (-1 on the wire)
	pepoch int16
	txn    bool
	marker bool // a commit marker of pid at base, timestamp stamps[0]
}

func (b rBatch) encode(t testing.TB) []byte {
	t.Helper()
	if b.marker {
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(hotlog.MarkerBatch(b.pid, b.pepoch, true, 0, b.stamps[0])); err != nil {
			t.Fatal(err)
		}
		kb.FirstOffset, kb.PartitionLeaderEpoch = b.base, b.epoch
		return kb.AppendTo(nil)
	}
	var raw []byte
	maxTS := b.stamps[0]
	for i, ts := range b.stamps {
		maxTS = max(maxTS, ts)
		off := b.base + int64(i)
		rec := kmsg.Record{TimestampDelta64: ts - b.stamps[0], OffsetDelta: int32(i),
			Key: []byte(fmt.Sprintf("k%d", off)), Value: []byte(fmt.Sprintf("value-%d", off))}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
	}
	records, err := recordbatch.CompressRecords(b.codec, raw)
	if err != nil {
		t.Fatal(err)
	}
	h := recordbatch.Header{BaseOffset: b.base, PartitionLeaderEpoch: b.epoch, Attributes: int16(b.codec),
		LastOffsetDelta: int32(len(b.stamps) - 1), FirstTimestamp: b.stamps[0], MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if b.pid != 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = b.pid, b.pepoch, int32(b.base) // any sequence will do
	}
	if b.txn {
		h.Attributes |= 0x10
	}
	return recordbatch.Encode(nil, h, int32(len(b.stamps)), records)
}

// stamps returns n timestamps from ts, one ms apart.
func stamps(ts int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = ts + int64(i)
	}
	return out
}

// putRestoreObject encodes batches into an object of restoreTopic
// partition 0 under id and puts it; snapEnd > 0 adds the producer
// snapshot of the batches as of snapEnd (from an empty state).
func putRestoreObject(t testing.TB, store ObjectStore, id metadata.TopicID, uploadEpoch int32, batches []rBatch,
	snapEnd int64) string {
	t.Helper()
	var log []byte
	table, _, _ := hotlog.NewProducerTable(nil)
	for _, b := range batches {
		enc := b.encode(t)
		if _, _, err := table.Apply(enc); err != nil {
			t.Fatal(err)
		}
		log = append(log, enc...)
	}
	meta := SegmentMeta{Topic: restoreTopic, TopicID: id, Partition: 0, UploadEpoch: uploadEpoch}
	if snapEnd > 0 {
		snap, err := table.Snapshot(snapEnd)
		if err != nil {
			t.Fatal(err)
		}
		meta.ProducerSnapshot = snap
	}
	obj, err := EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), meta)
	if err != nil {
		t.Fatal(err)
	}
	key, err := SegmentKey(SegmentKeyParts{Cluster: "c1", Topic: restoreTopic, TopicID: id, Partition: 0,
		BaseOffset: obj.Footer().BaseOffset, Epoch: uploadEpoch})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), key, obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // distinct ModTimes: later puts rank newer
	return key
}

func findRestoreTopic(t testing.TB, store ObjectStore, id metadata.TopicID) *ReplayTopic {
	t.Helper()
	rt, err := FindReplayTopic(context.Background(), store, "c1", restoreTopic, id.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// gotRecord is one record read back.
type gotRecord struct {
	offset, ts int64
	value      string
}

func (g gotRecord) String() string { return fmt.Sprintf("%d@%d", g.offset, g.ts) }

// readRestored reads the records of the restored entries back through a
// ReplayReader, as `strata replay` would read the restored topic.
func readRestored(t testing.TB, store ObjectStore, entries []metadata.TierEntry, committed bool) ([]gotRecord, bool) {
	t.Helper()
	ctx := context.Background()
	var objs []ReplayObject
	for _, e := range entries {
		o := ReplayObject{Key: e.Key, Size: e.Size, KeyBase: e.BaseOffset}
		f, err := readReplayFooter(ctx, store, o)
		if err != nil {
			t.Fatal(err)
		}
		o.Footer = f
		objs = append(objs, o)
	}
	aborted, err := ReplayAborted(ctx, store, objs, 0)
	if err != nil {
		t.Fatal(err)
	}
	rr := NewReplayReader(ctx, store, PlanReplay(objs), ReplayOptions{FromTime: -1, Committed: committed, Aborted: aborted})
	defer rr.Close()
	var out []gotRecord
	for {
		b, err := rr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs, err := recordbatch.DecodeRecords(b.Data, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			off := b.Header.BaseOffset + int64(r.OffsetDelta)
			if off >= b.From && off <= b.To {
				out = append(out, gotRecord{off, b.Header.FirstTimestamp + r.TimestampDelta64, string(r.Value)})
			}
		}
	}
	_, held := rr.Held()
	return out, held
}

// wantRecords lists the data records of batches below end, keeping those
// keep accepts (nil: all).
func wantRecords(batches []rBatch, end int64, keep func(rBatch) bool) []gotRecord {
	var out []gotRecord
	for _, b := range batches {
		if b.marker || (keep != nil && !keep(b)) {
			continue
		}
		for i, ts := range b.stamps {
			if off := b.base + int64(i); off < end {
				out = append(out, gotRecord{off, ts, fmt.Sprintf("value-%d", off)})
			}
		}
	}
	return out
}

func checkRecords(t testing.TB, got, want []gotRecord) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("records read back:\n %v\nwant:\n %v", got, want)
	}
}

// Three contiguous objects, the middle one uploaded twice (a retry): the
// whole-bucket plan references each range once, keeps the topic id, and
// reads back every record.
func TestRestoreWholeBucketPlanEqualsObjects(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 5)}, {base: 5, epoch: 2, stamps: stamps(1005, 5), codec: recordbatch.CodecGzip}}
	b := []rBatch{{base: 10, epoch: 2, stamps: stamps(1010, 10), codec: recordbatch.CodecSnappy}}
	c := []rBatch{{base: 20, epoch: 3, stamps: stamps(1020, 4)}}
	keyA := putRestoreObject(t, store, testTopicID, 2, a, 0)
	putRestoreObject(t, store, testTopicID, 2, b, 0)
	keyB2 := putRestoreObject(t, store, testTopicID, 2, b, 0) // the retry: newest wins
	keyC := putRestoreObject(t, store, testTopicID, 4, c, 0)

	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range res.Entries {
		keys = append(keys, e.Key)
		if e.TopicID != testTopicID || e.Partition != 0 {
			t.Fatalf("entry %+v", e)
		}
	}
	if !slices.Equal(keys, []string{keyA, keyB2, keyC}) {
		t.Fatalf("entries %v", keys)
	}
	wantRanges := [][2]int64{{0, 9}, {10, 19}, {20, 23}}
	wantEpochs := []int32{2, 2, 3}
	for i, e := range res.Entries {
		if [2]int64{e.BaseOffset, e.LastOffset} != wantRanges[i] || e.LeaderEpoch != wantEpochs[i] {
			t.Fatalf("entry %d: [%d, %d] epoch %d", i, e.BaseOffset, e.LastOffset, e.LeaderEpoch)
		}
	}
	if e := res.Entries[0]; e.FirstTimestamp != 1000 || e.MaxTimestamp != 1009 || e.Size <= FooterSize {
		t.Fatalf("entry 0 %+v", e)
	}
	if res.LogStart != 0 || res.End != 24 || res.BucketEnd != 24 || res.MaxEpoch != 4 || res.Cut || res.Dropped != 0 ||
		res.TailKey != "" || res.AbortedOpen != 0 || len(res.Gaps) != 0 || res.BucketEndTime != 1023 {
		t.Fatalf("plan %+v", res)
	}
	got, _ := readRestored(t, store, res.Entries, true)
	checkRecords(t, got, wantRecords(slices.Concat(a, b, c), 24, nil))
}

// A cut exactly at an object boundary references the objects before it
// as they are: no tail object.
func TestRestoreAsOfAtObjectBoundary(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 10)}}
	b := []rBatch{{base: 10, epoch: 1, stamps: stamps(1010, 10)}}
	keyA := putRestoreObject(t, store, testTopicID, 1, a, 10)
	putRestoreObject(t, store, testTopicID, 1, b, 20)
	asOf := time.UnixMilli(1009)
	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0,
		RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 1 || res.Entries[0].Key != keyA || res.Entries[0].TopicID != restoreNewID {
		t.Fatalf("entries %+v", res.Entries)
	}
	if res.Cut || res.TailKey != "" || res.End != 10 || res.CutOffset != 10 || res.Dropped != 10 || res.MaxEpoch != 1 ||
		res.BucketEnd != 20 || res.BucketEndTime != 1019 {
		t.Fatalf("plan %+v", res)
	}
	if infos, _ := store.List(context.Background(), "c1/topics/"+restoreTopic+"-"+restoreNewID.String()); len(infos) != 0 {
		t.Fatalf("objects written under the new id: %v", infos)
	}
}

// A cut inside a gzip batch: the tail object holds exactly the records
// before the cut (the straddling batch re-encoded with its codec); a
// later record with an earlier timestamp is dropped all the same.
func TestRestoreAsOfInsideCompressedBatch(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 10)}}
	b := []rBatch{{base: 10, epoch: 2, stamps: stamps(1010, 5), codec: recordbatch.CodecGzip},
		{base: 15, epoch: 3, stamps: []int64{1015, 1016, 1020, 1005, 1019}, codec: recordbatch.CodecGzip},
		{base: 20, epoch: 3, stamps: stamps(1021, 3)}}
	keyA := putRestoreObject(t, store, testTopicID, 1, a, 10)
	putRestoreObject(t, store, testTopicID, 3, b, 23)
	asOf := time.UnixMilli(1016).Add(500 * time.Microsecond) // sub-ms: still 1016
	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0,
		RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cut || res.CutOffset != 17 || res.End != 17 || res.Dropped != 6 || res.MaxEpoch != 3 || res.AbortedOpen != 0 {
		t.Fatalf("plan %+v", res)
	}
	if len(res.Entries) != 2 || res.Entries[0].Key != keyA || res.Entries[1].Key != res.TailKey {
		t.Fatalf("entries %+v", res.Entries)
	}
	tail := res.Entries[1]
	parts, err := ParseSegmentKey(tail.Key)
	if err != nil || parts.TopicID != restoreNewID || parts.Epoch != 4 || parts.BaseOffset != 10 {
		t.Fatalf("tail key %s: %+v %v", tail.Key, parts, err)
	}
	if tail.BaseOffset != 10 || tail.LastOffset != 16 || tail.MaxTimestamp != 1016 || tail.LeaderEpoch != 3 {
		t.Fatalf("tail entry %+v", tail)
	}
	rd, err := OpenObject(context.Background(), store, tail.Key, tail.Size)
	if err != nil {
		t.Fatal(err)
	}
	data, err := rd.ReadBatches(context.Background(), 15, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := recordbatch.ParseHeader(data); h.Codec() != recordbatch.CodecGzip || h.RecordCount != 2 || h.LastOffset() != 16 {
		t.Fatalf("re-encoded batch %+v", h)
	}
	if at, ok := rd.Index.ProducerSnapshotOffset(); !ok || at != 17 {
		t.Fatalf("tail producer snapshot at %d %v", at, ok)
	}
	got, _ := readRestored(t, store, res.Entries, true)
	checkRecords(t, got, wantRecords(slices.Concat(a, b), 17, nil))
}

// txnFixture: object A [0, 9] (a snapshot at 10 when withSnapshot) in
// which producer 7 opens a transaction at 5; object B [10, 19] where 7
// writes again, producer 9 opens one at 15, and both commit after the cut
// (17).
func txnFixture(t *testing.T, withSnapshot bool) (*objstore.MemStore, []rBatch, RestorePartition) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 5)},
		{base: 5, epoch: 1, stamps: stamps(1005, 2), pid: 7, pepoch: 2, txn: true},
		{base: 7, epoch: 1, stamps: stamps(1007, 3), codec: recordbatch.CodecLZ4}}
	b := []rBatch{{base: 10, epoch: 2, stamps: stamps(1010, 3), codec: recordbatch.CodecGzip},
		{base: 13, epoch: 2, stamps: stamps(1013, 2), pid: 7, pepoch: 2, txn: true},
		{base: 15, epoch: 2, stamps: stamps(1015, 2), pid: 9, pepoch: 5, txn: true, codec: recordbatch.CodecZstd},
		{base: 17, epoch: 2, stamps: []int64{1017}, pid: 9, pepoch: 5, marker: true},
		{base: 18, epoch: 2, stamps: []int64{1018}, pid: 7, pepoch: 2, marker: true},
		{base: 19, epoch: 2, stamps: []int64{1019}}}
	snapAt := int64(0)
	if withSnapshot {
		snapAt = 10
	}
	putRestoreObject(t, store, testTopicID, 1, a, snapAt)
	putRestoreObject(t, store, testTopicID, 2, b, 0)
	asOf := time.UnixMilli(1016)
	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0,
		RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if err != nil {
		t.Fatal(err)
	}
	return store, slices.Concat(a, b), res
}

// Transactions open at the cut get ABORT markers in the tail object: a
// read_committed replay of the restored topic hides them and is not held.
func TestRestoreAsOfAbortsOpenTransactions(t *testing.T) {
	store, batches, res := txnFixture(t, true)
	if !res.Cut || res.CutOffset != 17 || res.AbortedOpen != 2 || res.End != 19 || res.StateGuessed {
		t.Fatalf("plan %+v", res)
	}
	if res.MaxProducerID != 9 {
		t.Fatalf("max producer id %d, want 9 (the restored cluster must allocate above it)", res.MaxProducerID)
	}
	tail := res.Entries[len(res.Entries)-1]
	rd, err := OpenObject(context.Background(), store, tail.Key, tail.Size)
	if err != nil {
		t.Fatal(err)
	}
	want := []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: 5, LastOffset: 17, LastStableOffset: 15},
		{ProducerID: 9, FirstOffset: 15, LastOffset: 18, LastStableOffset: 19}}
	if !slices.Equal(rd.Index.Aborted, want) {
		t.Fatalf("tail aborted %+v, want %+v", rd.Index.Aborted, want)
	}
	checkMarker(t, rd, 17, 7, 2, res.MaxEpoch+1, 1016)
	checkMarker(t, rd, 18, 9, 5, res.MaxEpoch+1, 1016)
	state, at, err := hotlog.NewProducerTable(rd.Index.ProducerSnapshot)
	if err != nil || at != 19 || len(state.OpenTxns()) != 0 {
		t.Fatalf("tail snapshot at %d (%v): open %+v", at, err, state)
	}
	got, held := readRestored(t, store, res.Entries, true)
	if held {
		t.Fatal("read_committed replay held behind an undecided transaction")
	}
	checkRecords(t, got, wantRecords(batches, 17, func(b rBatch) bool { return !b.txn }))
	got, _ = readRestored(t, store, res.Entries, false)
	checkRecords(t, got, wantRecords(batches, 17, nil))
}

// Without a producer snapshot before the cut object, the open
// transactions are those seen in its own batches (flagged as a guess).
func TestRestoreAsOfOpenTransactionWithoutSnapshot(t *testing.T) {
	store, _, res := txnFixture(t, false)
	if !res.StateGuessed || res.AbortedOpen != 2 {
		t.Fatalf("plan %+v", res)
	}
	tail := res.Entries[len(res.Entries)-1]
	rd, err := OpenObject(context.Background(), store, tail.Key, tail.Size)
	if err != nil {
		t.Fatal(err)
	}
	if got := rd.Index.Aborted; len(got) != 2 || got[0].ProducerID != 7 || got[0].FirstOffset != 13 {
		t.Fatalf("aborted %+v", got)
	}
}

// checkMarker: the batch at offset is an ABORT marker of pid/epoch with the
// restore epoch, coordinator epoch 0 and timestamp ts.
func checkMarker(t *testing.T, rd *ObjectReader, offset, pid int64, pepoch int16, epoch int32, ts int64) {
	t.Helper()
	data, err := rd.ReadBatches(context.Background(), offset, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := CheckStoredBatch(data)
	if err != nil || !h.Control() || !h.Transactional() || h.BaseOffset != offset || h.ProducerID != pid ||
		h.ProducerEpoch != pepoch || h.PartitionLeaderEpoch != epoch || h.MaxTimestamp != ts {
		t.Fatalf("marker at %d: %+v %v", offset, h, err)
	}
	recs, err := recordbatch.DecodeRecords(data, 1<<10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("marker records %v %v", recs, err)
	}
	var key kmsg.ControlRecordKey
	var val kmsg.EndTxnMarker
	if key.ReadFrom(recs[0].Key) != nil || val.ReadFrom(recs[0].Value) != nil || key.Type != kmsg.ControlRecordKeyTypeAbort ||
		val.CoordinatorEpoch != 0 {
		t.Fatalf("marker record %+v %+v", key, val)
	}
}

// The same range uploaded twice (a retry): one tail, from one copy.
func TestRestoreAsOfDuplicateObjectsChosenOnce(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 10)}}
	b := []rBatch{{base: 10, epoch: 1, stamps: stamps(1010, 6), codec: recordbatch.CodecSnappy}}
	putRestoreObject(t, store, testTopicID, 1, a, 0)
	putRestoreObject(t, store, testTopicID, 1, b, 0)
	putRestoreObject(t, store, testTopicID, 1, b, 0)
	asOf := time.UnixMilli(1012)
	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0,
		RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 2 || res.Entries[1].Key != res.TailKey || res.End != 13 {
		t.Fatalf("plan %+v", res)
	}
	infos, err := store.List(context.Background(), TopicDir("c1", restoreTopic, restoreNewID))
	if err != nil || len(infos) != 1 || infos[0].Key != res.TailKey {
		t.Fatalf("new incarnation holds %v (%v)", infos, err)
	}
	got, _ := readRestored(t, store, res.Entries, true)
	checkRecords(t, got, wantRecords(slices.Concat(a, b), 13, nil))
}

// Damage in the object the cut rewrites is ErrCorruptObject; bad options
// are ErrRestore.
func TestRestoreErrors(t *testing.T) {
	store := objstore.NewMemStore()
	putRestoreObject(t, store, testTopicID, 1, []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 10)}}, 0)
	keyB := putRestoreObject(t, store, testTopicID, 1, []rBatch{{base: 10, epoch: 1, stamps: stamps(1010, 3)},
		{base: 13, epoch: 1, stamps: stamps(1013, 6), codec: recordbatch.CodecGzip}}, 0)
	rt := findRestoreTopic(t, store, testTopicID)
	asOf := time.UnixMilli(1015)
	if _, err := RestorePartitionPlan(context.Background(), store, rt, 0, RestoreOptions{AsOf: &asOf}); !errors.Is(err, ErrRestore) {
		t.Fatalf("as-of without a new topic id: %v", err)
	}
	if !store.Corrupt(keyB, 70, 0x40) { // inside the first batch's records
		t.Fatal("corrupt failed")
	}
	_, err := RestorePartitionPlan(context.Background(), store, rt, 0, RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if !errors.Is(err, ErrCorruptObject) {
		t.Fatalf("corrupt cut object: %v", err)
	}
	if _, _, err := hotlog.NewProducerTable([]byte("not a snapshot at all")); !errors.Is(err, hotlog.ErrBadProducerSnapshot) {
		t.Fatalf("bad snapshot: %v", err)
	}
}

func TestListBucketTopics(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemStore()
	oldID, newID := testTopicID, restoreNewID
	putRestoreObject(t, store, oldID, 1, []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 3)}}, 0)
	putRestoreObject(t, store, oldID, 1, []rBatch{{base: 3, epoch: 1, stamps: stamps(1003, 3)}}, 0)
	file, err := EncodeTopicFile(TopicFile{Topic: restoreTopic, TopicID: newID.String(), Partitions: 3,
		Configs: map[string]string{"retention.ms": "-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, TopicConfigKey("c1", restoreTopic, newID), bytes.NewReader(file), int64(len(file))); err != nil {
		t.Fatal(err)
	}
	putRestoreObject(t, store, newID, 1, []rBatch{{base: 0, epoch: 1, stamps: stamps(2000, 3)}}, 0)
	stray := "c1/topics/" + restoreTopic + "-" + newID.String() + "/notes.txt"
	store.Put(ctx, stray, strings.NewReader("x"), 1)
	store.Put(ctx, "c2/topics/other-"+newID.String()+"/topic.json", strings.NewReader("{}"), 2)

	got, err := ListBucketTopics(ctx, store, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != newID || got[1].ID != oldID || got[0].Name != restoreTopic || got[1].Name != restoreTopic {
		t.Fatalf("topics %+v", got)
	}
	if got[0].Objects != 1 || got[0].File == nil || got[0].File.Partitions != 3 || got[0].FileErr != nil {
		t.Fatalf("new incarnation %+v", got[0])
	}
	if got[1].Objects != 2 || got[1].File != nil || !got[0].Newest.After(got[1].Newest) {
		t.Fatalf("old incarnation %+v", got[1])
	}
}

// Objects overlapping after a leader change ([0, 14] and, at a higher
// epoch, [10, 19]) both reach past a cut at 12: the one with the lowest
// base is rewritten alone and covers every offset below the cut.
func TestRestoreAsOfOverlappingObjects(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 10)}, {base: 10, epoch: 1, stamps: stamps(1010, 5)}}
	b := []rBatch{{base: 10, epoch: 1, stamps: stamps(1010, 5)}, {base: 15, epoch: 2, stamps: stamps(1015, 5)}}
	putRestoreObject(t, store, testTopicID, 1, a, 0)
	putRestoreObject(t, store, testTopicID, 2, b, 0)
	asOf := time.UnixMilli(1011)
	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0,
		RestoreOptions{AsOf: &asOf, NewTopicID: restoreNewID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 1 || res.Entries[0].Key != res.TailKey || res.Entries[0].BaseOffset != 0 ||
		res.Entries[0].LastOffset != 11 || res.End != 12 || res.MaxEpoch != 1 {
		t.Fatalf("plan %+v", res)
	}
	got, _ := readRestored(t, store, res.Entries, true)
	checkRecords(t, got, wantRecords(a, 12, nil))
}

// Without AsOf, a transaction open at the bucket's end (its marker was in
// the hot tail, lost) is aborted by a markers-only object under the same
// topic id: nothing else changes, and read_committed is not stuck.
func TestRestoreWholeBucketAbortsOpenTransactionAtEnd(t *testing.T) {
	store := objstore.NewMemStore()
	a := []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 4)},
		{base: 4, epoch: 1, stamps: stamps(1004, 2), pid: 3, pepoch: 1, txn: true}}
	keyA := putRestoreObject(t, store, testTopicID, 1, a, 6)
	res, err := RestorePartitionPlan(context.Background(), store, findRestoreTopic(t, store, testTopicID), 0, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 2 || res.Entries[0].Key != keyA || res.Entries[1].Key != res.TailKey || res.Cut ||
		res.AbortedOpen != 1 || res.CutOffset != 6 || res.End != 7 || res.Dropped != 0 {
		t.Fatalf("plan %+v", res)
	}
	if p, err := ParseSegmentKey(res.TailKey); err != nil || p.TopicID != testTopicID || p.BaseOffset != 6 || p.Epoch != 2 {
		t.Fatalf("tail key %s %+v %v", res.TailKey, p, err)
	}
	rd, err := OpenObject(context.Background(), store, res.TailKey, res.Entries[1].Size)
	if err != nil {
		t.Fatal(err)
	}
	checkMarker(t, rd, 6, 3, 1, 2, 1005)
	got, held := readRestored(t, store, res.Entries, true)
	if held {
		t.Fatal("read_committed replay held")
	}
	checkRecords(t, got, wantRecords(a, 6, func(b rBatch) bool { return !b.txn }))
}
