package broker

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// txnDataBatch is idempotentBatch with the transactional attribute.
func txnDataBatch(pid int64, epoch int16, seq int32, n int) []byte {
	b := idempotentBatch(pid, epoch, seq, n)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10)
	binary.BigEndian.PutUint32(b[17:], recordbatch.Checksum(b[21:]))
	return b
}

// fetchIso fetches partition 0 of topic from offset with the isolation level.
func fetchIso(t *testing.T, cl *kgo.Client, topic string, id kadm.TopicID, offset int64, iso int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, iso
	req.MinBytes, req.MaxWaitMillis = 1, 5000 // a cold read answers within the wait
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id // the client picks the version: name or id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := requestDirect(t, cl, req).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// batchOffsets lists the base offsets of the batches in records.
func batchOffsets(records []byte) []int64 {
	var out []int64
	for len(records) >= 12 {
		out = append(out, int64(binary.BigEndian.Uint64(records)))
		records = records[12+int(binary.BigEndian.Uint32(records[8:])):]
	}
	return out
}

func listLatest(t *testing.T, cl *kgo.Client, topic string, iso int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := requestDirect(t, cl, req).(*kmsg.ListOffsetsResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

// writeMarkers sends one WriteTxnMarkers marker for partition 0 of topics
// and returns the per-topic codes.
func writeMarkers(t *testing.T, cl *kgo.Client, pid int64, epoch int16, commit bool, coordEpoch int32, topics ...string) []int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	for _, topic := range topics {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	resp := requestDirect(t, cl, req).(*kmsg.WriteTxnMarkersResponse)
	var codes []int16
	for _, rt := range resp.Markers[0].Topics {
		codes = append(codes, rt.Partitions[0].ErrorCode)
	}
	return codes
}

// TestReadCommittedWithMarkers: transactional batches hold the LSO back
// until WriteTxnMarkers ends them; read_committed then lists the aborted
// transaction, and a read_committed consumer skips its records.
func TestReadCommittedWithMarkers(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	id := createDataTopic(t, adm, "txn", 1, nil)
	for i, batch := range [][]byte{
		buildBatch(batchSpec{records: 3, valueSize: 4}), // 0-2
		txnDataBatch(10, 0, 0, 2),                       // 3-4, aborted below
		txnDataBatch(11, 0, 0, 2),                       // 5-6, committed below
		buildBatch(batchSpec{records: 1, valueSize: 4}), // 7
	} {
		if sp := produceRaw(t, b, "txn", -1, batch); sp.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	sp := fetchIso(t, cl, "txn", id, 0, 1)
	if sp.ErrorCode != 0 || sp.LastStableOffset != 3 || sp.HighWatermark != 8 || !slices.Equal(batchOffsets(sp.RecordBatches), []int64{0}) {
		t.Fatalf("read_committed before markers: err %d lso %d hw %d batches %v", sp.ErrorCode, sp.LastStableOffset, sp.HighWatermark, batchOffsets(sp.RecordBatches))
	}
	if got := listLatest(t, cl, "txn", 1); got != 3 {
		t.Fatalf("latest read_committed %d, want the LSO 3", got)
	}
	if got := listLatest(t, cl, "txn", 0); got != 8 {
		t.Fatalf("latest read_uncommitted %d, want the HW 8", got)
	}
	if codes := writeMarkers(t, cl, 10, 0, false, 1, "txn", "nosuch"); !slices.Equal(codes, []int16{0, kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("abort marker codes %v", codes)
	}
	if codes := writeMarkers(t, cl, 11, 0, true, 1, "txn"); !slices.Equal(codes, []int16{0}) {
		t.Fatalf("commit marker codes %v", codes)
	}
	if codes := writeMarkers(t, cl, 11, 0, true, 0, "txn"); !slices.Equal(codes, []int16{kerr.TransactionCoordinatorFenced.Code}) {
		t.Fatalf("stale coordinator codes %v", codes)
	}
	sp = fetchIso(t, cl, "txn", id, 0, 1)
	aborted := len(sp.AbortedTransactions) == 1 && sp.AbortedTransactions[0].ProducerID == 10 && sp.AbortedTransactions[0].FirstOffset == 3
	if sp.LastStableOffset != 10 || !slices.Equal(batchOffsets(sp.RecordBatches), []int64{0, 3, 5, 7, 8, 9}) || !aborted {
		t.Fatalf("read_committed after markers: lso %d batches %v aborted %+v", sp.LastStableOffset, batchOffsets(sp.RecordBatches), sp.AbortedTransactions)
	}
	if sp = fetchIso(t, cl, "txn", id, 9, 1); len(sp.AbortedTransactions) != 0 {
		t.Fatalf("aborts listed for a range after the abort: %+v", sp.AbortedTransactions)
	}
	if sp = fetchIso(t, cl, "txn", id, 0, 0); sp.AbortedTransactions != nil || len(batchOffsets(sp.RecordBatches)) != 6 {
		t.Fatalf("read_uncommitted: aborted %+v batches %v", sp.AbortedTransactions, batchOffsets(sp.RecordBatches))
	}
	// franz-go's read_committed consumer drops the aborted records.
	cons := newDataClient(t, b, kgo.ConsumeTopics("txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var offsets []int64
	for ctx := testCtx(t); len(offsets) < 6; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed offsets %v: %v", offsets, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { offsets = append(offsets, r.Offset) })
	}
	if !slices.Equal(offsets, []int64{0, 1, 2, 5, 6, 7}) {
		t.Fatalf("read_committed consumer got offsets %v", offsets)
	}
}

// TestReadCommittedFromTheBucket: aborted transactions whose segments were
// tiered and deleted locally are still listed by read_committed fetches
// served from the bucket (the objects' aborted-transaction sections).
func TestReadCommittedFromTheBucket(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(mem))
	adm, cl := adminClient(t, tb.b)
	id := createDataTopic(t, adm, "ctxn", 1, map[string]*string{
		"internal.segment.bytes": kadm.StringPtr("65536"), "local.retention.bytes": kadm.StringPtr("65536")})
	want := map[[2]int64]bool{} // {producer, first offset} of each abort
	seqs := map[int64]int32{}
	var lastMarker int64
	for i := range 24 {
		pid := int64(100 + i%2)
		batch := buildBatch(batchSpec{records: 2, valueSize: 9000, producerID: pid, timestamp: time.Now().UnixMilli()})
		binary.BigEndian.PutUint16(batch[21:], 0x10)
		binary.BigEndian.PutUint16(batch[51:], 0)
		binary.BigEndian.PutUint32(batch[53:], uint32(seqs[pid]))
		binary.BigEndian.PutUint32(batch[17:], recordbatch.Checksum(batch[21:]))
		seqs[pid] += 2
		sp := produceRaw(t, tb.b, "ctxn", -1, batch)
		if sp.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(sp.ErrorCode))
		}
		commit := i%3 == 0
		if codes := writeMarkers(t, cl, pid, 0, commit, 1, "ctxn"); codes[0] != 0 {
			t.Fatalf("marker %d: %v", i, kerr.ErrorForCode(codes[0]))
		}
		if !commit {
			want[[2]int64{pid, sp.BaseOffset}] = true
		}
		lastMarker = sp.BaseOffset + 2
	}
	produceTiered(t, tb.b, "ctxn", 1, 0, 200) // seal and upload past the last marker
	waitAllUploaded(t, tb.b, "ctxn", 1, 30*time.Second)
	p, _ := tb.b.parts.lookup("ctxn", 0)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.localLogStartOffset() > lastMarker })
	got := map[[2]int64]bool{}
	for offset := int64(0); offset <= lastMarker; {
		sp := fetchIso(t, cl, "ctxn", id, offset, 1)
		offs := batchOffsets(sp.RecordBatches)
		if sp.ErrorCode != 0 || len(offs) == 0 {
			t.Fatalf("cold fetch at %d: error %d, %d batches", offset, sp.ErrorCode, len(offs))
		}
		for _, a := range sp.AbortedTransactions {
			got[[2]int64{a.ProducerID, a.FirstOffset}] = true
		}
		offset = offs[len(offs)-1] + 1
	}
	if len(got) != len(want) {
		t.Fatalf("aborts listed %v, want %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("abort %v not listed (got %v)", k, got)
		}
	}
}
