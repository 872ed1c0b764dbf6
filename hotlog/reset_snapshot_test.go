package hotlog

import (
	"errors"
	"testing"
	"time"
)

// appendUntilRoll appends one-record batches of producer 1 (epoch 0) until
// the first segment is sealed. It returns the first sealed segment's end
// (the next segment's base) and the sequence of the batch ending just below it.
func appendUntilRoll(t *testing.T, l *Log, ts int64) (end int64, lastSeq int32) {
	t.Helper()
	for seq := int32(0); seq < 1000; seq++ {
		res := mustAppend(t, l, idemBatch(t, 1, 0, seq, 1, ts), 1)
		if sealed := l.SealedSegments(); len(sealed) > 0 {
			end = sealed[0].NextOffset
			if res.BaseOffset != end {
				t.Fatalf("batch at %d did not start the new segment at %d", res.BaseOffset, end)
			}
			return end, seq - 1
		}
	}
	t.Fatal("the log never rolled")
	return 0, 0
}

func TestResetToWithProducerSnapshotDetectsDuplicates(t *testing.T) {
	ts := time.Now().UnixMilli()
	leader := mustOpen(t, testConfig(t, t.TempDir()))
	defer leader.Close()
	end, seq := appendUntilRoll(t, leader, ts)
	snap, ok := leader.ProducerSnapshotAt(end)
	if !ok {
		t.Fatalf("no producer snapshot at the roll offset %d", end)
	}
	if _, ok := leader.ProducerSnapshotAt(end + 1); ok {
		t.Fatal("a snapshot reported at an offset no roll wrote")
	}
	retry := idemBatch(t, 1, 0, seq, 1, ts) // the batch at end-1, retried

	// Without the snapshot the retry would be written again: the bug.
	plain := mustOpen(t, testConfig(t, t.TempDir()))
	defer plain.Close()
	if err := plain.ResetTo(end); err != nil {
		t.Fatal(err)
	}
	if res, err := plain.Append(retry, 2); err != nil || res.Duplicate {
		t.Fatalf("empty state: retry gave %+v, %v; want a fresh append", res, err)
	}

	dir := t.TempDir()
	follower := mustOpen(t, testConfig(t, dir))
	mustAppend(t, follower, simpleBatch(t, 3, ts, 10), 1) // some old log to throw away
	if err := follower.ResetToWithProducerSnapshot(end, snap); err != nil {
		t.Fatal(err)
	}
	checkDuplicate(t, follower, retry, end-1)
	follower.Close()
	reopened := mustOpen(t, testConfig(t, dir))
	defer reopened.Close()
	checkDuplicate(t, reopened, retry, end-1)
	if res, err := reopened.Append(idemBatch(t, 1, 0, seq+1, 1, ts), 2); err != nil || res.Duplicate || res.BaseOffset != end {
		t.Fatalf("next sequence after the reset: %+v, %v", res, err)
	}
}

func checkDuplicate(t *testing.T, l *Log, batch []byte, offset int64) {
	t.Helper()
	leo := l.LogEndOffset()
	res, err := l.Append(append([]byte(nil), batch...), 2)
	if err != nil || !res.Duplicate || res.BaseOffset != offset || res.LastOffset != offset {
		t.Fatalf("retry of the batch at %d: %+v, %v; want a duplicate", offset, res, err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("duplicate moved the LEO %d -> %d", leo, l.LogEndOffset())
	}
}

func TestResetToWithBadProducerSnapshotLeavesLog(t *testing.T) {
	ts := time.Now().UnixMilli()
	leader := mustOpen(t, testConfig(t, t.TempDir()))
	defer leader.Close()
	end, _ := appendUntilRoll(t, leader, ts)
	snap, _ := leader.ProducerSnapshotAt(end)
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 3, ts, 10), 1)
	flipped := append([]byte(nil), snap...)
	flipped[len(flipped)-1] ^= 1
	for name, tc := range map[string]struct {
		offset int64
		data   []byte
	}{"other offset": {end + 1, snap}, "bad crc": {end, flipped}, "empty": {end, nil}} {
		if err := l.ResetToWithProducerSnapshot(tc.offset, tc.data); !errors.Is(err, ErrBadProducerSnapshot) {
			t.Fatalf("%s: %v, want ErrBadProducerSnapshot", name, err)
		}
		if l.LogStartOffset() != 0 || l.LogEndOffset() != 3 {
			t.Fatalf("%s: log changed to [%d, %d)", name, l.LogStartOffset(), l.LogEndOffset())
		}
	}
	if _, err := CheckProducerSnapshot(snap); err != nil {
		t.Fatal(err)
	}
}
