package hotlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// fillKeyed appends n batches of 4 records (values ~100 bytes), record
// timestamps 1000+offset, so a test segment (4096 bytes) holds ~7 batches.
func fillKeyed(t testing.TB, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		leo := l.LogEndOffset()
		recs := make([]testRecord, 4)
		for j := range recs {
			off := leo + int64(j)
			recs[j] = testRecord{key: []byte{byte(off % 13)}, value: bytes.Repeat([]byte{byte(off)}, 100), ts: 1000 + off}
		}
		mustAppend(t, l, makeBatch(t, recordbatch.CodecNone, recs), 1)
	}
}

// thinBatch rewrites a batch as the cleaner would (uncompressed): header
// fields preserved, only the records at offsets keep accepts remain.
func thinBatch(t testing.TB, batch []byte, keep func(offset int64) bool) []byte {
	t.Helper()
	h, err := recordbatch.CheckStored(batch)
	if err != nil {
		t.Fatalf("thinBatch: %v", err)
	}
	recs, err := recordbatch.DecodeRecords(batch, 1<<24)
	if err != nil {
		t.Fatalf("thinBatch: %v", err)
	}
	var raw []byte
	n := int32(0)
	for _, r := range recs {
		if keep(h.BaseOffset + int64(r.OffsetDelta)) {
			raw, n = r.AppendTo(raw), n+1
		}
	}
	b := kmsg.RecordBatch{FirstOffset: h.BaseOffset, PartitionLeaderEpoch: h.PartitionLeaderEpoch, Magic: 2,
		Attributes: h.Attributes &^ recordbatch.AttrCodecMask, LastOffsetDelta: h.LastOffsetDelta,
		FirstTimestamp: h.FirstTimestamp, MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID,
		ProducerEpoch: h.ProducerEpoch, FirstSequence: h.BaseSequence, NumRecords: n, Records: raw}
	b.Length = int32(recordbatch.MinLength + len(raw))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[recordbatch.PosCRC:], recordbatch.Checksum(out[recordbatch.PosAttributes:]))
	return out
}

// segmentBatches returns the batches of a sealed segment, read through
// OpenSealedSegment (as the cleaner reads them).
func segmentBatches(t testing.TB, l *Log, base int64) [][]byte {
	t.Helper()
	f, size, err := l.OpenSealedSegment(base)
	if err != nil {
		t.Fatalf("OpenSealedSegment(%d): %v", base, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, 0, size))
	if err != nil {
		t.Fatal(err)
	}
	return splitStored(t, data)
}

// splitStored splits whole, valid batches.
func splitStored(t testing.TB, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		h, err := recordbatch.CheckStored(data)
		if err != nil {
			t.Fatalf("bad stored batch: %v", err)
		}
		out, data = append(out, data[:h.Size()]), data[h.Size():]
	}
	return out
}

// cleanPolicy rewrites one batch (nil: drop it) and says whether the
// cleaned output should start a new segment at it.
type cleanPolicy struct {
	rewrite func(batch []byte) []byte
	split   func(h recordbatch.Header) bool
}

// writeCleaned rewrites the sealed segments olds (a contiguous run) under
// p into cleaned segments, returning them and the batches they hold.
func writeCleaned(t testing.TB, l *Log, olds []int64, p cleanPolicy) ([]*CleanedSegment, [][]byte) {
	t.Helper()
	cur, err := l.NewCleanedSegment(olds[0])
	if err != nil {
		t.Fatal(err)
	}
	cleaned, kept := []*CleanedSegment{cur}, [][]byte(nil)
	for _, base := range olds {
		for _, b := range segmentBatches(t, l, base) {
			out := p.rewrite(b)
			if out == nil {
				continue
			}
			h, _ := recordbatch.ParseHeader(out)
			if p.split != nil && p.split(h) && cur.Size() > 0 {
				if cur, err = l.NewCleanedSegment(h.BaseOffset); err != nil {
					t.Fatal(err)
				}
				cleaned = append(cleaned, cur)
			}
			if err := cur.Append(out); err != nil {
				t.Fatalf("Append: %v", err)
			}
			kept = append(kept, out)
		}
	}
	return cleaned, kept
}

// bases returns the base offsets of segment infos.
func bases(segs []SegmentInfo) []int64 {
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.BaseOffset
	}
	return out
}

// logBatches reads the whole log (from the log start) as raw batches.
func logBatches(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	leo := l.LogEndOffset()
	for off := l.LogStartOffset(); off < leo; {
		b, err := l.Read(off, 1<<20, leo)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break // only a gap left up to the LEO
		}
		for _, batch := range splitStored(t, b) {
			h, _ := recordbatch.ParseHeader(batch)
			if h.LastOffset() < off {
				t.Fatalf("Read(%d) returned a batch ending at %d", off, h.LastOffset())
			}
			out = append(out, batch)
			off = h.LastOffset() + 1
		}
	}
	return out
}

// sameBatches reports whether two batch lists are byte-identical.
func sameBatches(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

// cleanerLeftovers lists files a finished swap must not leave behind.
func cleanerLeftovers(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) ||
			strings.HasSuffix(n, deletedSuffix) || strings.HasPrefix(n, swapMarkerFile) {
			out = append(out, n)
		}
	}
	return out
}

// copyDir copies the regular files of src into a new temp dir.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// closeWriters closes the cleaned writers' files without removing them
// (what a crash does to a cleaner that had not committed).
func closeWriters(cleaned []*CleanedSegment) {
	for _, c := range cleaned {
		if c.state != cleanedCommitted {
			c.seg.file.Close()
		}
	}
}

// mustBeSimulatedCrash fails unless err is the injected crash.
func mustBeSimulatedCrash(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("want a simulated crash, got %v", err)
	}
}
