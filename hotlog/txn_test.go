package hotlog

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// txnBatch is idemBatch with the transactional attribute.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	t.Helper()
	b := idemBatch(t, pid, epoch, seq, n, ts)
	attrs := binary.BigEndian.Uint16(b[recordbatch.PosAttributes:]) | recordbatch.AttrTransactional
	binary.BigEndian.PutUint16(b[recordbatch.PosAttributes:], attrs)
	binary.BigEndian.PutUint32(b[recordbatch.PosCRC:], recordbatch.Checksum(b[recordbatch.PosAttributes:]))
	return b
}

func wantFUO(t *testing.T, l *Log, want int64) {
	t.Helper()
	got, ok := l.FirstUnstableOffset()
	if (want < 0) == ok || (ok && got != want) {
		t.Fatalf("first unstable offset %d %v, want %d", got, ok, want)
	}
}

func TestTxnFirstUnstableOffsetAndAborts(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	now := time.Now().UnixMilli()
	mustAppend(t, l, simpleBatch(t, 3, now, 10), 1) // 0-2
	wantFUO(t, l, -1)
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 3, now), 1) // 3-5
	wantFUO(t, l, 3)
	mustAppend(t, l, txnBatch(t, 2, 0, 0, 2, now), 1) // 6-7
	mustAppend(t, l, txnBatch(t, 1, 0, 3, 1, now), 1) // 8: same txn
	wantFUO(t, l, 3)
	mustAppend(t, l, MarkerBatch(1, 0, true, 4, now), 1) // 9: commit producer 1
	wantFUO(t, l, 6)
	if got := l.AbortedTxns(0, 100); len(got) != 0 {
		t.Fatalf("aborted after a commit: %+v", got)
	}
	mustAppend(t, l, MarkerBatch(2, 0, false, 4, now), 1) // 10: abort producer 2
	wantFUO(t, l, -1)
	want := AbortedTxn{ProducerID: 2, FirstOffset: 6, LastOffset: 10, LastStableOffset: 11}
	for _, c := range []struct {
		from, to int64
		n        int
	}{{0, 100, 1}, {0, 6, 0}, {0, 7, 1}, {10, 11, 1}, {11, 20, 0}, {7, 7, 0}} {
		got := l.AbortedTxns(c.from, c.to)
		if len(got) != c.n || (c.n == 1 && got[0] != want) {
			t.Fatalf("AbortedTxns(%d, %d) = %+v, want %d of %+v", c.from, c.to, got, c.n, want)
		}
	}
	ps := l.Producers()
	for _, p := range ps {
		if p.CoordinatorEpoch != 4 || p.CurrentTxnStartOffset != -1 {
			t.Fatalf("producer state after markers: %+v", p)
		}
	}
	// An abort while producer 1 has a newer transaction open records the
	// LSO at that transaction's start.
	mustAppend(t, l, txnBatch(t, 1, 0, 4, 1, now), 1) // 11
	mustAppend(t, l, txnBatch(t, 2, 0, 2, 1, now), 1) // 12
	mustAppend(t, l, MarkerBatch(2, 0, false, 4, now), 1)
	got := l.AbortedTxns(12, 14)
	if len(got) != 1 || got[0] != (AbortedTxn{ProducerID: 2, FirstOffset: 12, LastOffset: 13, LastStableOffset: 11}) {
		t.Fatalf("second abort: %+v", got)
	}
	wantFUO(t, l, 11)
}

func TestTxnMarkerChecks(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	mustAppend(t, l, txnBatch(t, 1, 3, 0, 1, 1), 1)
	mustAppend(t, l, MarkerBatch(1, 3, true, 5, 1), 1)
	if _, err := l.Append(MarkerBatch(1, 2, true, 5, 1), 1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of an old epoch: %v", err)
	}
	if _, err := l.Append(MarkerBatch(1, 3, false, 4, 1), 1); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an old coordinator: %v", err)
	}
	// A control batch that is not a marker: a data batch flagged control.
	bad := idemBatch(t, 1, 3, 1, 1, 1)
	binary.BigEndian.PutUint16(bad[recordbatch.PosAttributes:], recordbatch.AttrControl|recordbatch.AttrTransactional)
	binary.BigEndian.PutUint32(bad[recordbatch.PosCRC:], recordbatch.Checksum(bad[recordbatch.PosAttributes:]))
	for _, app := range []func([]byte) (AppendResult, error){
		func(b []byte) (AppendResult, error) { return l.Append(b, 1) },
		func(b []byte) (AppendResult, error) {
			recordbatch.SetBaseOffsetAndEpoch(b, l.LogEndOffset(), 1)
			return l.AppendReplicated(b)
		},
	} {
		if _, err := app(append([]byte(nil), bad...)); !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("control batch without a marker: %v", err)
		}
	}
	if l.LogEndOffset() != 2 {
		t.Fatalf("LEO %d after rejected markers", l.LogEndOffset())
	}
}

// txnRun appends n transactions of producers 1..3 across many segments,
// aborting every other one, and returns the expected index entries.
func txnRun(t *testing.T, l *Log, n int) []AbortedTxn {
	t.Helper()
	now := time.Now().UnixMilli()
	seqs := map[int64]int32{}
	var want []AbortedTxn
	for i := range n {
		pid := int64(i%3 + 1)
		first := mustAppend(t, l, txnBatch(t, pid, 0, seqs[pid], 2, now), 1).BaseOffset
		mustAppend(t, l, txnBatch(t, pid, 0, seqs[pid]+2, 2, now), 1)
		seqs[pid] += 4
		commit := i%2 == 0
		res := mustAppend(t, l, MarkerBatch(pid, 0, commit, 1, now), 1)
		if !commit {
			want = append(want, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: res.BaseOffset, LastStableOffset: res.BaseOffset + 1})
		}
	}
	return want
}

func checkAborted(t *testing.T, l *Log, want []AbortedTxn) {
	t.Helper()
	got := l.AbortedTxns(0, l.LogEndOffset())
	if !slices.Equal(got, want) {
		t.Fatalf("aborted txns:\n%+v\nwant\n%+v", got, want)
	}
}

func TestTxnIndexSurvivesReopenCrashAndDamage(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	want := txnRun(t, l, 40)
	if len(l.SealedSegments()) < 3 {
		t.Fatalf("want several segments, have %d", len(l.SealedSegments()))
	}
	checkAborted(t, l, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, testConfig(t, dir))
	checkAborted(t, l, want)
	wantFUO(t, l, -1)
	// An open transaction survives a crash.
	open := mustAppend(t, l, txnBatch(t, 9, 0, 0, 1, time.Now().UnixMilli()), 1).BaseOffset
	seg := l.SealedSegments()
	crash(t, l)
	// A damaged index file is re-derived (from a snapshot at or below its
	// segment, so the later index is rewritten too).
	var withEntries []int64
	for _, s := range seg {
		if len(s.AbortedTxns) > 0 {
			withEntries = append(withEntries, s.BaseOffset)
		}
	}
	if len(withEntries) < 2 {
		t.Fatalf("segments with aborts: %v", withEntries)
	}
	if err := os.WriteFile(segmentFileName(dir, withEntries[0], txnIndexSuffix), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	checkAborted(t, l, want)
	wantFUO(t, l, open)
	if data, err := os.ReadFile(segmentFileName(dir, withEntries[0], txnIndexSuffix)); err != nil || len(data)%txnIndexEntrySize != 0 || len(data) == 0 {
		t.Fatalf("damaged index not rewritten: %d bytes, %v", len(data), err)
	}
}

func TestTxnIndexAfterTruncateAndRetention(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.RetentionMs = -1
	l := mustOpen(t, cfg)
	defer l.Close()
	want := txnRun(t, l, 40)
	// Cut just below the marker of an abort in the middle: that abort's
	// entry goes and its transaction is open again.
	cut := want[len(want)/2]
	if err := l.Truncate(cut.LastOffset); err != nil {
		t.Fatal(err)
	}
	checkAborted(t, l, want[:len(want)/2])
	wantFUO(t, l, cut.FirstOffset)
	mustAppend(t, l, MarkerBatch(cut.ProducerID, 0, false, 1, time.Now().UnixMilli()), 1)
	checkAborted(t, l, want[:len(want)/2+1])
	wantFUO(t, l, -1)
	crash(t, l)
	l = mustOpen(t, cfg)
	checkAborted(t, l, want[:len(want)/2+1])
	// Deleting segments deletes their index files.
	sealed := l.SealedSegments()
	if err := l.DeleteRecordsBefore(sealed[len(sealed)-1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, s := range sealed[:len(sealed)-1] {
		if _, err := os.Stat(segmentFileName(dir, s.BaseOffset, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("txnindex of deleted segment %d: %v", s.BaseOffset, err)
		}
	}
	for _, a := range l.AbortedTxns(0, l.LogEndOffset()) {
		if a.LastOffset < sealed[len(sealed)-1].BaseOffset {
			t.Fatalf("entry of a deleted segment still listed: %+v", a)
		}
	}
	if err := l.ResetTo(l.LogEndOffset() + 10); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTxns(0, 1<<40); len(got) != 0 {
		t.Fatalf("aborts after ResetTo: %+v", got)
	}
	wantFUO(t, l, -1)
}

func TestTxnIndexDecodeRejects(t *testing.T) {
	good := []AbortedTxn{{1, 10, 12, 13}, {2, 5, 14, 6}}
	b := EncodeAbortedTxns(good)
	if got, err := DecodeAbortedTxns(b, 10); err != nil || !slices.Equal(got, good) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, bad := range map[string][]AbortedTxn{
		"last below base":       {{1, 1, 9, 10}},
		"first after last":      {{1, 13, 12, 13}},
		"not increasing":        {{1, 10, 12, 13}, {1, 10, 12, 13}},
		"negative producer":     {{-1, 10, 12, 13}},
		"lso past the marker":   {{1, 10, 12, 14}},
		"negative first offset": {{1, -1, 12, 13}},
	} {
		if _, err := DecodeAbortedTxns(EncodeAbortedTxns(bad), 10); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := DecodeAbortedTxns(b[:len(b)-1], 10); err == nil {
		t.Fatal("partial entry decoded")
	}
}

func FuzzDecodeAbortedTxns(f *testing.F) {
	f.Add(EncodeAbortedTxns([]AbortedTxn{{1, 10, 12, 13}, {2, 5, 14, 6}}), int64(10))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		got, err := DecodeAbortedTxns(b, base)
		if err != nil {
			return
		}
		if again := EncodeAbortedTxns(got); string(again) != string(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func FuzzParseTxnMarker(f *testing.F) {
	f.Add(MarkerBatch(1, 2, true, 3, 4))
	f.Add(MarkerBatch(1, 2, false, 3, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		// With the CRC fixed up the fuzzer reaches the record parsing.
		if len(b) > recordbatch.PosAttributes {
			b = append([]byte(nil), b...)
			binary.BigEndian.PutUint32(b[recordbatch.PosCRC:], recordbatch.Checksum(b[recordbatch.PosAttributes:]))
		}
		if _, _, err := recordbatch.Validate(b); err != nil {
			return
		}
		parseTxnMarker(b) // must not panic
	})
}

func TestTxnStateReplicated(t *testing.T) {
	leader := mustOpen(t, testConfig(t, t.TempDir()))
	defer leader.Close()
	want := txnRun(t, leader, 12)
	open := mustAppend(t, leader, txnBatch(t, 9, 0, 0, 1, time.Now().UnixMilli()), 1).BaseOffset
	follower := mustOpen(t, testConfig(t, t.TempDir()))
	defer follower.Close()
	for off := int64(0); off < leader.LogEndOffset(); {
		data, err := leader.Read(off, 1<<20, leader.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		res, err := follower.AppendReplicated(data)
		if err != nil {
			t.Fatal(err)
		}
		off = res.LastOffset + 1
	}
	checkAborted(t, follower, want)
	wantFUO(t, follower, open)
}
