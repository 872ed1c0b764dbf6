package hotlog

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// idemBatch is a batch of n records from producer pid with the given epoch
// and base sequence, timestamps from ts.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	t.Helper()
	b := simpleBatch(t, n, ts, 150) // about seven batches per test segment
	be := binary.BigEndian
	be.PutUint64(b[recordbatch.PosProducerID:], uint64(pid))
	be.PutUint16(b[recordbatch.PosProducerEpoch:], uint16(epoch))
	be.PutUint32(b[recordbatch.PosBaseSequence:], uint32(seq))
	be.PutUint32(b[recordbatch.PosCRC:], recordbatch.Checksum(b[recordbatch.PosAttributes:]))
	if _, _, err := recordbatch.Validate(b); err != nil {
		t.Fatalf("idemBatch: %v", err)
	}
	return b
}

// produceStep is one leader append in a sequence-rule case.
type produceStep struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	// want: nil (appended at the LEO), errDup (duplicate of dupBase), or an error.
	want    error
	dupBase int64
}

var errDup = errors.New("want duplicate")

func TestProducerSequenceRules(t *testing.T) {
	const max32 = math.MaxInt32
	cases := []struct {
		name  string
		steps []produceStep
	}{
		{"in sequence", []produceStep{{1, 0, 0, 3, nil, 0}, {1, 0, 3, 2, nil, 0}, {1, 0, 5, 1, nil, 0}}},
		{"gap", []produceStep{{1, 0, 0, 3, nil, 0}, {1, 0, 4, 1, ErrOutOfOrderSequence, 0}}},
		{"sequence repeats but length differs", []produceStep{{1, 0, 0, 3, nil, 0}, {1, 0, 0, 2, ErrOutOfOrderSequence, 0}}},
		{"duplicate of the last batch", []produceStep{{1, 0, 0, 3, nil, 0}, {1, 0, 0, 3, errDup, 0}, {1, 0, 3, 1, nil, 0}}},
		{"duplicate of an older batch within five", []produceStep{
			{1, 0, 0, 2, nil, 0}, {1, 0, 2, 2, nil, 0}, {1, 0, 4, 2, nil, 0}, {1, 0, 6, 2, nil, 0}, {1, 0, 8, 2, nil, 0},
			{1, 0, 0, 2, errDup, 0}, {1, 0, 2, 2, errDup, 2}, {1, 0, 10, 2, nil, 0},
			// the batch at seq 0 left the five remembered: a plain out-of-order retry now
			{1, 0, 0, 2, ErrOutOfOrderSequence, 0}, {1, 0, 2, 2, errDup, 2}}},
		{"older epoch fenced", []produceStep{{1, 3, 0, 1, nil, 0}, {1, 2, 1, 1, ErrInvalidProducerEpoch, 0}, {1, 2, 0, 1, ErrInvalidProducerEpoch, 0}}},
		{"new epoch starts at 0", []produceStep{{1, 0, 0, 5, nil, 0}, {1, 1, 0, 1, nil, 0}, {1, 1, 1, 1, nil, 0}}},
		{"new epoch not at 0", []produceStep{{1, 0, 0, 5, nil, 0}, {1, 1, 5, 1, ErrOutOfOrderSequence, 0}}},
		{"duplicate of an old epoch is fenced, not a duplicate", []produceStep{{1, 0, 0, 2, nil, 0}, {1, 1, 0, 2, nil, 0}, {1, 0, 0, 2, ErrInvalidProducerEpoch, 0}}},
		{"unknown producer any sequence", []produceStep{{7, 2, 42, 3, nil, 0}, {7, 2, 45, 1, nil, 0}, {7, 2, 47, 1, ErrOutOfOrderSequence, 0}}},
		{"producers are independent", []produceStep{{1, 0, 0, 2, nil, 0}, {2, 0, 0, 2, nil, 0}, {1, 0, 2, 1, nil, 0}, {2, 0, 0, 2, errDup, 2}}},
		{"sequence wraps at MaxInt32", []produceStep{{1, 0, max32 - 1, 3, nil, 0}, {1, 0, 1, 2, nil, 0}, {1, 0, max32 - 1, 3, errDup, 0}}},
		{"wrap exactly at MaxInt32", []produceStep{{1, 0, max32 - 1, 2, nil, 0}, {1, 0, 0, 1, nil, 0}}},
		{"no wrap without reaching MaxInt32", []produceStep{{1, 0, max32 - 5, 2, nil, 0}, {1, 0, 0, 1, ErrOutOfOrderSequence, 0}}},
		{"not idempotent never checked", []produceStep{{-1, -1, -1, 2, nil, 0}, {-1, -1, -1, 2, nil, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := mustOpen(t, testConfig(t, t.TempDir()))
			defer l.Close()
			for i, st := range tc.steps {
				leo := l.LogEndOffset()
				res, err := l.Append(idemBatch(t, st.pid, st.epoch, st.seq, st.n, 1000), 1)
				checkStep(t, i, st, leo, res, err)
				if st.want != nil && l.LogEndOffset() != leo {
					t.Fatalf("step %d: LEO moved %d -> %d without an append", i, leo, l.LogEndOffset())
				}
			}
		})
	}
}

func checkStep(t *testing.T, i int, st produceStep, leo int64, res AppendResult, err error) {
	t.Helper()
	switch {
	case st.want == errDup:
		if err != nil || !res.Duplicate || res.BaseOffset != st.dupBase || res.LastOffset != st.dupBase+int64(st.n)-1 {
			t.Fatalf("step %d: %+v %v, want duplicate at %d", i, res, err, st.dupBase)
		}
	case st.want != nil:
		if !errors.Is(err, st.want) {
			t.Fatalf("step %d: %+v %v, want %v", i, res, err, st.want)
		}
	default:
		if err != nil || res.Duplicate || res.BaseOffset != leo || res.LastOffset != leo+int64(st.n)-1 {
			t.Fatalf("step %d: %+v %v, want appended at %d", i, res, err, leo)
		}
	}
}

func TestProducerMultiBatchAppendIsAllOrNothing(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	two := append(idemBatch(t, 1, 0, 0, 2, 1), idemBatch(t, 1, 0, 2, 2, 1)...)
	if res, err := l.Append(two, 1); err != nil || res.LastOffset != 3 {
		t.Fatalf("two in sequence: %+v %v", res, err)
	}
	bad := append(idemBatch(t, 1, 0, 4, 1, 1), idemBatch(t, 1, 0, 9, 1, 1)...)
	if _, err := l.Append(bad, 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("second batch out of order: %v", err)
	}
	if l.LogEndOffset() != 4 {
		t.Fatalf("LEO %d after a rejected append, want 4", l.LogEndOffset())
	}
	mustAppend(t, l, idemBatch(t, 1, 0, 4, 1, 1), 1)
}

func TestProducerReplicatedMirrorsWithoutChecks(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	var off int64
	for _, b := range [][]byte{idemBatch(t, 1, 0, 0, 2, 1), idemBatch(t, 1, 0, 10, 2, 1), idemBatch(t, 1, 5, 3, 1, 1)} {
		recordbatch.SetBaseOffsetAndEpoch(b, off, 1)
		res, err := l.AppendReplicated(b)
		if err != nil {
			t.Fatalf("replicated append at %d: %v", off, err)
		}
		off = res.LastOffset + 1
	}
	// The leader-to-be recognises the last replicated batch as a retry.
	if res, err := l.Append(idemBatch(t, 1, 5, 3, 1, 1), 2); err != nil || !res.Duplicate || res.BaseOffset != 4 {
		t.Fatalf("retry of a replicated batch: %+v %v", res, err)
	}
	if res, err := l.Append(idemBatch(t, 1, 5, 4, 1, 1), 2); err != nil || res.Duplicate || res.BaseOffset != 5 {
		t.Fatalf("next batch: %+v %v", res, err)
	}
}

// produceRun appends n batches of 3 records from producer 1 (epoch 0),
// timestamps from ts, returning each batch's base offset.
func produceRun(t *testing.T, l *Log, n int, ts int64) []int64 {
	t.Helper()
	var bases []int64
	for i := range n {
		res := mustAppend(t, l, idemBatch(t, 1, 0, int32(3*i), 3, ts+int64(i)), 1)
		bases = append(bases, res.BaseOffset)
	}
	return bases
}

// checkRetries asserts that the last five batches of a produceRun of n are
// recognised as duplicates and the next sequence is accepted (with a
// current timestamp: producer.id.expiration.ms counts from it).
func checkRetries(t *testing.T, l *Log, bases []int64) {
	t.Helper()
	now := time.Now().UnixMilli()
	n := len(bases)
	for i := max(n-5, 0); i < n; i++ {
		res, err := l.Append(idemBatch(t, 1, 0, int32(3*i), 3, now), 1)
		if err != nil || !res.Duplicate || res.BaseOffset != bases[i] || res.LastOffset != bases[i]+2 {
			t.Fatalf("retry of batch %d: %+v %v, want duplicate at %d", i, res, err, bases[i])
		}
	}
	if _, err := l.Append(idemBatch(t, 1, 0, int32(3*n+3), 1, now), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after reload: %v", err)
	}
	leo := l.LogEndOffset()
	if res, err := l.Append(idemBatch(t, 1, 0, int32(3*n), 1, now), 1); err != nil || res.BaseOffset != leo {
		t.Fatalf("next after reload: %+v %v", res, err)
	}
}

func TestProducerStateSurvivesCleanReopen(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	bases := produceRun(t, l, 30, time.Now().UnixMilli()) // several rolls, so several snapshots
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := listSnapshots(dir)
	if len(snaps) < 2 || snaps[len(snaps)-1] != bases[29]+3 {
		t.Fatalf("snapshots %v, want several and one at the LEO %d", snaps, bases[29]+3)
	}
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	checkRetries(t, l, bases)
}

func TestProducerStateSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	bases := produceRun(t, l, 30, time.Now().UnixMilli())
	crash(t, l)
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	checkRetries(t, l, bases)
}

func TestProducerStateWithoutAnySnapshot(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	bases := produceRun(t, l, 30, time.Now().UnixMilli())
	crash(t, l)
	if err := removeSnapshots(dir, func(int64) bool { return false }); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	checkRetries(t, l, bases)
}

func TestProducerCorruptSnapshotFallsBack(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	bases := produceRun(t, l, 30, time.Now().UnixMilli())
	crash(t, l)
	snaps, _ := listSnapshots(dir)
	if len(snaps) < 2 {
		t.Fatalf("snapshots %v", snaps)
	}
	newest := segmentFileName(dir, snaps[len(snaps)-1], snapshotSuffix)
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0x40
	if err := os.WriteFile(newest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	if _, err := os.Stat(newest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt snapshot kept: %v", err)
	}
	checkRetries(t, l, bases)
}

func TestProducerStateAfterTruncate(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	bases := produceRun(t, l, 30, time.Now().UnixMilli())
	cut := bases[12] // below several roll snapshots
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	snaps, _ := listSnapshots(dir)
	if len(snaps) == 0 || snaps[len(snaps)-1] > cut {
		t.Fatalf("snapshots %v after truncating to %d", snaps, cut)
	}
	// Batches 7..11 are the last five now; batch 12 is gone and may be re-sent.
	checkRetries(t, l, bases[:12])
	// After the append checkRetries made, the retry of the truncated batch
	// 12 is out of order, not a duplicate of the vanished one.
	if res, err := l.Append(idemBatch(t, 1, 0, 36, 3, time.Now().UnixMilli()), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retry of a truncated batch: %+v %v", res, err)
	}
	crash(t, l)
	l = mustOpen(t, testConfig(t, dir))
	if res, err := l.Append(idemBatch(t, 1, 0, 33, 3, time.Now().UnixMilli()), 1); err != nil || !res.Duplicate {
		t.Fatalf("after truncate and crash: %+v %v", res, err)
	}
}

func TestProducerStateResetTo(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	produceRun(t, l, 30, time.Now().UnixMilli())
	if err := l.ResetTo(500); err != nil {
		t.Fatal(err)
	}
	if snaps, _ := listSnapshots(dir); len(snaps) != 0 {
		t.Fatalf("snapshots %v after ResetTo", snaps)
	}
	if ps := l.Producers(); len(ps) != 0 {
		t.Fatalf("producers %+v after ResetTo", ps)
	}
	// Unknown again: any sequence goes.
	if res, err := l.Append(idemBatch(t, 1, 0, 12, 3, 1), 1); err != nil || res.BaseOffset != 500 {
		t.Fatalf("after reset: %+v %v", res, err)
	}
}

func TestProducerExpiryAndSnapshotRetention(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{now: time.UnixMilli(1_000_000)}
	cfg := testConfig(t, dir)
	cfg.Now, cfg.ProducerIDExpiration, cfg.RetentionMs = clock.Now, time.Hour, -1
	l := mustOpen(t, cfg)
	defer l.Close()
	bases := produceRun(t, l, 30, 1000)
	if err := l.DeleteRecordsBefore(bases[20]); err != nil {
		t.Fatal(err)
	}
	snaps, _ := listSnapshots(dir)
	if len(snaps) == 0 || snaps[0] > l.LogStartOffset() || (len(snaps) > 1 && snaps[1] <= l.LogStartOffset()) {
		t.Fatalf("snapshots %v with log start %d: want exactly one at or below it", snaps, l.LogStartOffset())
	}
	// Records are ~1000 ms old; the clock is at 1000 s: not yet an hour.
	if _, err := l.ApplyRetention(clock.Now()); err != nil {
		t.Fatal(err)
	}
	if len(l.Producers()) != 1 {
		t.Fatalf("producer expired early: %+v", l.Producers())
	}
	if res, err := l.Append(idemBatch(t, 1, 0, 87, 3, 1000), 1); err != nil || !res.Duplicate || res.BaseOffset != bases[29] {
		t.Fatalf("retry before expiry: %+v %v", res, err)
	}
	clock.Advance(2 * time.Hour)
	if _, err := l.ApplyRetention(clock.Now()); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); len(ps) != 0 {
		t.Fatalf("producers %+v after expiry", ps)
	}
	if _, err := l.Append(idemBatch(t, 1, 0, 3, 3, 1), 1); err != nil {
		t.Fatalf("expired producer is unknown and accepted: %v", err)
	}
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	table := newProducerTable()
	for _, h := range []recordbatch.Header{
		{ProducerID: 9, ProducerEpoch: 2, BaseSequence: 0, LastOffsetDelta: 2, BaseOffset: 10, MaxTimestamp: 5},
		{ProducerID: 3, ProducerEpoch: 0, BaseSequence: math.MaxInt32, LastOffsetDelta: 1, BaseOffset: 13, MaxTimestamp: 6},
		{ProducerID: 9, ProducerEpoch: 2, BaseSequence: 3, LastOffsetDelta: 0, BaseOffset: 15, MaxTimestamp: 7, Attributes: recordbatch.AttrTransactional},
		{ProducerID: 4, ProducerEpoch: 1, BaseOffset: 16, Attributes: recordbatch.AttrControl},
	} {
		table.apply(h)
	}
	data := encodeProducerSnapshot(17, &table)
	off, got, err := decodeProducerSnapshot(data)
	if err != nil || off != 17 || len(got.entries) != 3 {
		t.Fatalf("decode: %d %v %v", off, got.entries, err)
	}
	for id, e := range table.entries {
		if !sameEntry(got.entries[id], e) {
			t.Fatalf("producer %d: %+v, want %+v", id, got.entries[id], *e)
		}
	}
	if e := got.entries[3]; e.batches[0].lastSeq != 0 {
		t.Fatalf("wrapped last sequence %d, want 0", e.batches[0].lastSeq)
	}
	if e := got.entries[9]; e.currentTxnFirstOffset != 15 || e.n != 2 {
		t.Fatalf("producer 9: %+v", e)
	}
	for _, cut := range []int{0, 5, snapshotHeaderSize, len(data) - 1} {
		if _, _, err := decodeProducerSnapshot(data[:cut]); err == nil {
			t.Fatalf("decoded %d of %d bytes", cut, len(data))
		}
	}
}

// sameEntry compares the meaningful parts of two entries.
func sameEntry(a, b *producerEntry) bool {
	if a == nil || b == nil || a.n != b.n {
		return false
	}
	x, y := *a, *b
	clear(x.batches[x.n:])
	clear(y.batches[y.n:])
	return x == y
}

func FuzzDecodeProducerSnapshot(f *testing.F) {
	table := newProducerTable()
	for i := range 7 {
		table.apply(recordbatch.Header{ProducerID: int64(i % 3), ProducerEpoch: 1, BaseSequence: int32(2 * i),
			LastOffsetDelta: 1, BaseOffset: int64(2 * i), MaxTimestamp: int64(i)})
	}
	f.Add(encodeProducerSnapshot(20, &table))
	empty := newProducerTable()
	f.Add(encodeProducerSnapshot(0, &empty))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeProducerSnapshot(b) // as found on disk: must not panic
		// With the CRC fixed up the fuzzer reaches the structure checks.
		if len(b) >= snapshotHeaderSize {
			b = append([]byte(nil), b...)
			binary.BigEndian.PutUint32(b[2:], recordbatch.Checksum(b[snapshotCRCStart:]))
		}
		off, got, err := decodeProducerSnapshot(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes: nothing is
		// silently dropped or invented.
		if again := encodeProducerSnapshot(off, &got); string(again) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}

// TestProducerWithOldTimestampsDoesNotExpire: expiry counts from the
// producer's last append (wall clock), not only from its records'
// timestamps, so a producer writing old timestamps (a replay, a backfill)
// keeps its state and its retries are still recognised as duplicates. Its
// state does expire once it has been silent for the expiration time.
func TestProducerWithOldTimestampsDoesNotExpire(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)} // 2027
	cfg := testConfig(t, t.TempDir())
	cfg.Now, cfg.ProducerIDExpiration, cfg.RetentionMs = clock.Now, time.Hour, -1
	l := mustOpen(t, cfg)
	defer l.Close()
	old := int64(1_700_000_000_000) // 2023: years older than the expiration
	first := mustAppend(t, l, idemBatch(t, 7, 0, 0, 3, old), 1)
	if _, err := l.ApplyRetention(clock.Now()); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Append(idemBatch(t, 7, 0, 0, 3, old), 1); err != nil || !res.Duplicate || res.BaseOffset != first.BaseOffset {
		t.Fatalf("retry of a batch with old timestamps after a retention check: %+v %v (want a duplicate of %d)", res, err, first.BaseOffset)
	}
	clock.Advance(2 * time.Hour)
	if _, err := l.ApplyRetention(clock.Now()); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); len(ps) != 0 {
		t.Fatalf("producers %+v after two silent hours", ps)
	}
}
