package hotlog

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

func TestSealedSegmentsAndOpen(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 40)
	sealed := l.SealedSegments()
	if len(sealed) != l.Stats().Segments-1 || len(sealed) < 2 {
		t.Fatalf("%d sealed of %d", len(sealed), l.Stats().Segments)
	}
	for i, s := range sealed {
		if s.Size <= 0 || s.NextOffset <= s.BaseOffset || (i > 0 && s.BaseOffset != sealed[i-1].NextOffset) {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	f, size, err := l.OpenSealedSegment(sealed[0].BaseOffset)
	if err != nil || size != sealed[0].Size {
		t.Fatalf("open: %v size %d", err, size)
	}
	defer f.Close()
	// The open file survives the segment's deletion.
	if err := l.DeleteRecordsBefore(sealed[1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment file still there: %v", err)
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, size))
	if err != nil || int64(len(data)) != size {
		t.Fatalf("read deleted segment: %d bytes, %v", len(data), err)
	}
	if _, err := recordbatch.ParseHeader(data); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if _, _, err := l.OpenSealedSegment(sealed[0].BaseOffset); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("open deleted: %v", err)
	}
	if _, _, err := l.OpenSealedSegment(l.LogEndOffset()); err == nil {
		t.Fatal("opened the active segment")
	}
}

func TestApplyRetentionBelowKeepsUnreleased(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionMs, cfg.RetentionBytes = -1, 1 // size rule: delete every sealed segment
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 100)
	sealed := l.SealedSegments()
	if len(sealed) < 5 {
		t.Fatalf("only %d sealed segments", len(sealed))
	}
	// Only the first two are released (uploaded): the rest must stay.
	n, err := l.ApplyRetentionBelow(time.Now(), sealed[1].NextOffset)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if l.LogStartOffset() != sealed[2].BaseOffset || len(l.SealedSegments()) != len(sealed)-2 {
		t.Fatalf("start %d, %d sealed left", l.LogStartOffset(), len(l.SealedSegments()))
	}
	// A limit inside a segment releases nothing of it.
	if n, err := l.ApplyRetentionBelow(time.Now(), sealed[2].NextOffset-1); err != nil || n != 0 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	// Segments below the log start go whatever the limit.
	if err := l.DeleteRecordsBefore(sealed[3].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != sealed[3].BaseOffset || len(l.SealedSegments()) != len(sealed)-3 {
		t.Fatalf("after delete records: start %d", l.LogStartOffset())
	}
	if n, err := l.ApplyRetention(time.Now()); err != nil || n != len(sealed)-3 {
		t.Fatalf("unlimited retention deleted %d, %v", n, err)
	}
}
