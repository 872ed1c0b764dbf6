package hotlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A batch damaged on disk while the log is open is never served: a read
// stops before it, and a read starting at it fails.
func TestReadNeverServesCorruptBatch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 10)
	batchSize := len(simpleBatch(t, 3, 0, 100))
	f, err := os.OpenFile(lastSegment(t, dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xAA}, int64(3*batchSize+90)) // inside batch 9-11
	f.Close()
	b, err := l.Read(0, 1<<20, 30)
	if err != nil || len(b) != 3*batchSize {
		t.Fatalf("want the 3 good batches, got %d bytes, %v", len(b), err)
	}
	if _, err := l.Read(10, 1<<20, 30); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("read of the damaged batch: %v", err)
	}
	if l.Stats().CorruptReads != 2 {
		t.Fatalf("corrupt reads %d", l.Stats().CorruptReads)
	}
}

func TestOpenCleansLeftoversAndValidatesConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, recoveryPointFile+tmpSuffix), []byte("junk"), 0o644)
	os.WriteFile(segmentFileName(dir, 500, indexSuffix), []byte("orphan"), 0o644)
	os.WriteFile(filepath.Join(dir, leaderEpochFile), []byte("garbage\n"), 0o644)
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	for _, name := range []string{recoveryPointFile + tmpSuffix, filepath.Base(segmentFileName(dir, 500, indexSuffix))} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s not removed", name)
		}
	}
	if l.LatestEpoch() != -1 {
		t.Fatal("garbage epoch checkpoint used")
	}
	for _, bad := range []Config{{}, {Dir: dir, SegmentBytes: 5}, {Dir: dir, Durability: 7}, {Dir: dir, FlushInterval: -1}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v accepted: %v", bad, err)
		}
	}
	if err := l.Reconfigure(Config{Dir: dir, Durability: DurabilityReplication}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("durability change accepted: %v", err)
	}
}
