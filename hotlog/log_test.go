package hotlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// fillLog appends n batches of 3 records, 100-byte values, timestamps 1000+3i...
func fillLog(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		res := mustAppend(t, l, simpleBatch(t, 3, int64(1000+3*i), 100), 1)
		if res.BaseOffset != int64(3*i) || res.LastOffset != int64(3*i+2) {
			t.Fatalf("append %d landed at %+v", i, res)
		}
	}
}

func TestAppendReadAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	fillLog(t, l, 100)
	if got := len(segmentFiles(t, dir)); got < 5 {
		t.Fatalf("expected rolls, got %d segments", got)
	}
	if l.LogEndOffset() != 300 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	for off := int64(0); off < 300; off++ {
		b, err := l.Read(off, 1, 300)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := recordbatch.Validate(b)
		if err != nil || len(b) != h.Size() { // KIP-74: one batch although > maxBytes
			t.Fatalf("Read(%d): %v, %d bytes", off, err, len(b))
		}
		if h.BaseOffset > off || h.LastOffset() < off || h.PartitionLeaderEpoch != 1 {
			t.Fatalf("Read(%d) gave batch %d-%d", off, h.BaseOffset, h.LastOffset())
		}
	}
	if hs := readAll(t, l, 0); len(hs) != 100 {
		t.Fatalf("read %d batches", len(hs))
	}
	// upTo stops before a batch reaching it; offset == upTo is empty.
	b, err := l.Read(0, 1<<20, 5)
	if err != nil || len(b) == 0 {
		t.Fatal(err)
	}
	if h, _ := recordbatch.ParseHeader(b); h.LastOffset() != 2 || len(b) != h.Size() {
		t.Fatalf("upTo not honoured: %d bytes", len(b))
	}
	if b, err := l.Read(7, 1<<20, 7); err != nil || len(b) != 0 {
		t.Fatalf("offset == upTo: %v %d", err, len(b))
	}
	if _, err := l.Read(301, 100, 400); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past LEO: %v", err)
	}
	if b, err := l.Read(300, 100, 400); err != nil || len(b) != 0 {
		t.Fatalf("at LEO: %v", err)
	}
}

func TestReopenCleanKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillLog(t, l, 50)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatal("marker still there after Open")
	}
	if l.LogEndOffset() != 150 || l.FlushedOffset() != 150 || l.LatestEpoch() != 1 {
		t.Fatalf("LEO %d flushed %d epoch %d", l.LogEndOffset(), l.FlushedOffset(), l.LatestEpoch())
	}
	if hs := readAll(t, l, 0); len(hs) != 50 {
		t.Fatalf("read %d batches", len(hs))
	}
	if res := mustAppend(t, l, simpleBatch(t, 2, 5, 1), 1); res.BaseOffset != 150 {
		t.Fatalf("append after reopen at %d", res.BaseOffset)
	}
}

// lastSegment returns the path of the active segment's .log.
func lastSegment(t *testing.T, dir string) string {
	files := segmentFiles(t, dir)
	return files[len(files)-1]
}

func TestRecoveryTruncatesTornTail(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillLog(t, l, 30)
	crash(t, l) // kill -9: no marker
	path := lastSegment(t, dir)
	size := fileSize(t, path)
	if err := os.Truncate(path, size-50); err != nil { // tear the last batch
		t.Fatal(err)
	}
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	if l.LogEndOffset() != 87 {
		t.Fatalf("LEO %d, want 87 (the torn batch 87-89 dropped)", l.LogEndOffset())
	}
	if l.Stats().RecoveryTruncation == 0 {
		t.Fatal("truncation not counted")
	}
	if hs := readAll(t, l, 0); len(hs) != 29 {
		t.Fatalf("read %d batches", len(hs))
	}
	if res := mustAppend(t, l, simpleBatch(t, 1, 5, 1), 1); res.BaseOffset != 87 {
		t.Fatalf("append after recovery at %d", res.BaseOffset)
	}
}

func TestRecoveryDetectsFlippedByte(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := t.TempDir()
		cfg := testConfig(t, dir)
		cfg.SegmentBytes = 1 << 20 // one segment: the damage is in the active one
		l := mustOpen(t, cfg)
		fillLog(t, l, 10)
		if clean {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			crash(t, l)
		}
		// Flip one byte inside the value of the 5th batch (offsets 12-14).
		batchSize := len(simpleBatch(t, 3, 0, 100))
		path := lastSegment(t, dir)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		var one [1]byte
		pos := int64(4*batchSize + 100)
		f.ReadAt(one[:], pos)
		one[0] ^= 0x40
		f.WriteAt(one[:], pos)
		f.Close()

		l = mustOpen(t, cfg)
		if l.LogEndOffset() != 12 {
			t.Fatalf("clean=%v: LEO %d, want 12", clean, l.LogEndOffset())
		}
		if _, err := l.Read(13, 1<<20, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("damaged offset served: %v", err)
		}
		if fileSize(t, path) != int64(4*batchSize) {
			t.Fatalf("file not truncated at the damage: %d", fileSize(t, path))
		}
		if res := mustAppend(t, l, simpleBatch(t, 2, 5, 1), 2); res.BaseOffset != 12 {
			t.Fatalf("append after recovery at %d", res.BaseOffset)
		}
		if hs := readAll(t, l, 0); len(hs) != 5 || hs[4].PartitionLeaderEpoch != 2 {
			t.Fatalf("read %d batches", len(hs))
		}
		l.Close()
	}
}

func TestRecoveryRebuildsIndexesAndDropsLaterSegments(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillLog(t, l, 60)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	base := files[1][:len(files[1])-len(logSuffix)]
	os.Remove(base + indexSuffix)
	os.WriteFile(base+timeIndexSuffix, []byte{1, 2, 3}, 0o644)
	l = mustOpen(t, testConfig(t, dir))
	if hs := readAll(t, l, 0); len(hs) != 60 {
		t.Fatalf("read %d batches after index rebuild", len(hs))
	}
	crash(t, l)
	// Corrupt the second segment's first batch header with no recovery
	// point past it: segment 1 is cut to nothing and all later ones deleted.
	os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte("0\n0\n"), 0o644)
	f, _ := os.OpenFile(files[1], os.O_RDWR, 0)
	f.WriteAt([]byte{0xff, 0xff}, recordbatch.PosCRC)
	f.Close()
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	first := fileSize(t, files[0])
	wantLEO := int64(3 * (first / int64(len(simpleBatch(t, 3, 0, 100)))))
	if l.LogEndOffset() != wantLEO || len(segmentFiles(t, dir)) != 2 {
		t.Fatalf("LEO %d want %d, %d segments", l.LogEndOffset(), wantLEO, len(segmentFiles(t, dir)))
	}
}

func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, cfg)
	defer l.Close()
	// A disk-like fsync latency, so the test means the same on tmpfs.
	l.syncFile = func(f *os.File) error { time.Sleep(time.Millisecond); return fdatasync(f) }
	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				res, err := l.Append(simpleBatch(t, 1, 1, 50), 0)
				if err == nil {
					err = l.WaitFlushed(context.Background(), res.LastOffset)
				}
				if err == nil && l.FlushedOffset() <= res.LastOffset {
					err = errors.New("WaitFlushed returned before the flush")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := l.Stats()
	if l.FlushedOffset() != writers*perWriter || st.Appends != writers*perWriter {
		t.Fatalf("flushed %d, appends %d", l.FlushedOffset(), st.Appends)
	}
	if st.Fsyncs == 0 || st.Fsyncs >= st.Appends {
		t.Fatalf("%d fsyncs for %d appends: no group commit", st.Fsyncs, st.Appends)
	}
	t.Logf("%d appends, %d fsyncs", st.Appends, st.Fsyncs)
}

func TestReplicationDurabilityFlushedIsLEO(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Durability = DurabilityReplication
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 3)
	if l.FlushedOffset() != 9 {
		t.Fatalf("flushed %d", l.FlushedOffset())
	}
	if err := l.WaitFlushed(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
}

func TestFsyncFailureIsSticky(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	boom := errors.New("EIO")
	l.syncFile = func(*os.File) error { return boom }
	res, err := l.Append(simpleBatch(t, 1, 1, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitFlushed(ctx, res.LastOffset); !errors.Is(err, ErrStorage) || !errors.Is(err, boom) {
		t.Fatalf("WaitFlushed: %v", err)
	}
	if _, err := l.Append(simpleBatch(t, 1, 1, 1), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after failure: %v", err)
	}
	if l.FlushedOffset() != 0 {
		t.Fatalf("flushed moved to %d", l.FlushedOffset())
	}
}

func TestChangedFires(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	ch := l.Changed()
	mustAppend(t, l, simpleBatch(t, 1, 1, 1), 0)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed by an append")
	}
}

// TestFlushIntervalSpacesBusyRounds: with FlushInterval (here an hour), a
// producer that waits for each flush before appending again is flushed at
// once every time; an append that arrives while a round runs waits for the
// interval (still unflushed when the log closes, and Close does not wait
// for it).
func TestFlushIntervalSpacesBusyRounds(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlushInterval = time.Hour
	l := mustOpen(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		res, err := l.Append(simpleBatch(t, 1, 1, 50), 0)
		if err == nil {
			err = l.WaitFlushed(ctx, res.LastOffset)
		}
		if err != nil {
			t.Fatalf("append %d of a waiting producer not flushed at once: %v", i, err)
		}
	}
	syncing, release := make(chan struct{}, 1), make(chan struct{})
	l.flushMu.Lock() // syncFile is read by rounds under flushMu
	l.syncFile = func(f *os.File) error {
		syncing <- struct{}{}
		<-release
		return fdatasync(f)
	}
	l.flushMu.Unlock()
	first, err := l.Append(simpleBatch(t, 1, 1, 50), 0)
	if err != nil {
		t.Fatal(err)
	}
	<-syncing
	second, err := l.Append(simpleBatch(t, 1, 1, 50), 0)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := l.WaitFlushed(ctx, first.LastOffset); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := l.FlushedOffset(); got > second.LastOffset {
		t.Fatalf("an append that arrived during a round was flushed to %d within the interval", got)
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the flush interval")
	}
}
