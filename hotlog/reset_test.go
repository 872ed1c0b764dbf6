package hotlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// checkEmptyAt asserts l is an empty log at offset that accepts appends
// there and learns their epoch.
func checkEmptyAt(t *testing.T, l *Log, offset int64) {
	t.Helper()
	if got := [...]int64{l.LogStartOffset(), l.LogEndOffset(), l.FlushedOffset()}; got != [...]int64{offset, offset, offset} {
		t.Fatalf("start, end, flushed = %v, want all %d", got, offset)
	}
	if e := l.LatestEpoch(); e != -1 {
		t.Fatalf("latest epoch %d after reset, want -1", e)
	}
	if _, err := l.Read(offset-1, 1<<20, offset+100); offset > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the reset offset: %v", err)
	}
	batch := simpleBatch(t, 3, 5000, 10)
	recordbatch.SetBaseOffsetAndEpoch(batch, offset, 7)
	res, err := l.AppendReplicated(batch)
	if err != nil || res.BaseOffset != offset || res.LastOffset != offset+2 {
		t.Fatalf("append after reset: %+v %v", res, err)
	}
	if e, end := l.EndOffsetForEpoch(7); e != 7 || end != offset+3 {
		t.Fatalf("epoch 7 ends at (%d, %d), want (7, %d)", e, end, offset+3)
	}
	if hs := readAll(t, l, offset); len(hs) != 1 || hs[0].BaseOffset != offset {
		t.Fatalf("read after reset: %+v", hs)
	}
}

func TestResetToEmptiesAndRestarts(t *testing.T) {
	for _, offset := range []int64{0, 150, 300, 5000} {
		dir := t.TempDir()
		l := mustOpen(t, testConfig(t, dir))
		fillLog(t, l, 100) // offsets 0..299 over several segments, epoch 1
		changed := l.Changed()
		if err := l.ResetTo(offset); err != nil {
			t.Fatalf("ResetTo(%d): %v", offset, err)
		}
		select {
		case <-changed:
		default:
			t.Fatal("ResetTo did not wake Changed() listeners")
		}
		if files := segmentFiles(t, dir); len(files) != 1 || files[0] != segmentFileName(dir, offset, logSuffix) {
			t.Fatalf("segments after ResetTo(%d): %v", offset, files)
		}
		checkEmptyAt(t, l, offset)
		if err := l.WaitFlushed(context.Background(), offset+2); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, testConfig(t, dir))
		if l.LogStartOffset() != offset || l.LogEndOffset() != offset+3 {
			t.Fatalf("reopened: start %d end %d, want %d %d", l.LogStartOffset(), l.LogEndOffset(), offset, offset+3)
		}
		if e, end := l.EndOffsetForEpoch(7); e != 7 || end != offset+3 {
			t.Fatalf("reopened epoch 7: (%d, %d)", e, end)
		}
		l.Close()
	}
}

func TestResetToRejectsBadOffsetsAndClosedLog(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillLog(t, l, 3)
	if err := l.ResetTo(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("ResetTo(-1): %v", err)
	}
	if err := l.ResetTo(maxOffset + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("ResetTo(maxOffset+1): %v", err)
	}
	if l.LogEndOffset() != 9 {
		t.Fatalf("a refused reset changed the log: LEO %d", l.LogEndOffset())
	}
	l.Close()
	if err := l.ResetTo(10); !errors.Is(err, ErrClosed) {
		t.Fatalf("ResetTo on a closed log: %v", err)
	}
}

// TestResetToCrashAfterCompletion: a kill -9 right after ResetTo returns
// (no Close, no clean-shutdown marker) reopens as the empty log.
func TestResetToCrashAfterCompletion(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillLog(t, l, 100)
	if err := l.ResetTo(1000); err != nil {
		t.Fatal(err)
	}
	crash(t, l)
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	checkEmptyAt(t, l, 1000)
}

// TestResetToCrashAtEveryStep writes the commit marker as ResetTo does,
// stops completeReset after each of its steps (a crash there), and checks
// that Open always finishes the reset; a crash before the marker keeps
// the old log whole.
func TestResetToCrashAtEveryStep(t *testing.T) {
	const offset = 777
	prepare := func(t *testing.T) (string, int) {
		dir := t.TempDir()
		l := mustOpen(t, testConfig(t, dir))
		fillLog(t, l, 100)
		crash(t, l) // unclean: recovery must not trust stale checkpoints either
		return dir, len(segmentFiles(t, dir))
	}
	t.Run("before marker", func(t *testing.T) {
		dir, _ := prepare(t)
		os.WriteFile(filepath.Join(dir, resetFile+tmpSuffix), []byte("0\n777\n"), 0o644) // torn marker write
		l := mustOpen(t, testConfig(t, dir))
		defer l.Close()
		if l.LogStartOffset() != 0 || l.LogEndOffset() != 300 || len(readAll(t, l, 0)) != 100 {
			t.Fatalf("old log not kept: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
		}
	})
	_, segments := prepare(t)
	steps := segments + 6 // one per deleted segment, then finishResetFiles' steps
	for crashAt := 1; crashAt <= steps; crashAt++ {
		dir, _ := prepare(t)
		if err := writeOffsetCheckpoint(dir, resetFile, offset); err != nil {
			t.Fatal(err)
		}
		s, err := completeReset(dir, offset, func(step int) bool { return step == crashAt })
		if !errors.Is(err, errSimulatedCrash) {
			t.Fatalf("crash at step %d/%d: completeReset returned %v", crashAt, steps, err)
		}
		if s != nil {
			t.Fatal("a crashed completeReset returned a segment")
		}
		l := mustOpen(t, testConfig(t, dir))
		checkEmptyAt(t, l, offset)
		if _, err := os.Stat(filepath.Join(dir, resetFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("crash at step %d: reset marker left after Open: %v", crashAt, err)
		}
		l.Close()
	}
}

// TestResetToKeepsTimeAndRetentionWorking: the restarted log rolls and
// retains like any other (segment state is fresh, not inherited).
func TestResetToKeepsTimeAndRetentionWorking(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{now: time.UnixMilli(100_000)}
	cfg := testConfig(t, dir)
	cfg.Now = clock.Now
	cfg.RetentionBytes = 8192
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 50)
	if err := l.ResetTo(10_000); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := l.Append(simpleBatch(t, 3, 100_000, 100), 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.ApplyRetention(clock.Now()); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 10_300 || l.LogStartOffset() <= 10_000 || l.Size() > 8192+4096 {
		t.Fatalf("after appends and retention: start %d end %d size %d", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
}
