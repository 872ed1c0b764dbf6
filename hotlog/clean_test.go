package hotlog

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// dropAndThin is the test cleaning: drops every batch whose (base/4)%3 is
// 1 and, of the others, the records at offsets = 1 mod 4.
var dropAndThin = func(t testing.TB) func([]byte) []byte {
	return func(b []byte) []byte {
		h, _ := recordbatch.ParseHeader(b)
		if (h.BaseOffset/4)%3 == 1 {
			return nil
		}
		return thinBatch(t, b, func(off int64) bool { return off%4 != 1 })
	}
}

// splitOnceAt starts one new cleaned segment at the first batch at or
// after offset.
func splitOnceAt(offset int64) func(recordbatch.Header) bool {
	done := false
	return func(h recordbatch.Header) bool {
		if done || h.BaseOffset < offset {
			return false
		}
		done = true
		return true
	}
}

// cleanFirst rewrites the first n sealed segments of l with dropAndThin,
// split once in the middle, and returns the olds, the cleaned writers and
// the log's batches once they are in place.
func cleanFirst(t testing.TB, l *Log, n int) (olds []int64, cleaned []*CleanedSegment, want [][]byte) {
	return cleanFirstSplit(t, l, n, false)
}

// cleanFirstSplit is cleanFirst; atOldBase splits the output exactly at
// the middle old segment's base (that batch is kept whole).
func cleanFirstSplit(t testing.TB, l *Log, n int, atOldBase bool) (olds []int64, cleaned []*CleanedSegment, want [][]byte) {
	t.Helper()
	sealed := l.SealedSegments()
	if len(sealed) <= n {
		t.Fatalf("only %d sealed segments", len(sealed))
	}
	olds = bases(sealed[:n])
	mid := sealed[n/2].BaseOffset
	p := cleanPolicy{rewrite: dropAndThin(t), split: splitOnceAt(mid + 1)}
	if atOldBase {
		thin := p.rewrite
		p.rewrite = func(b []byte) []byte {
			if h, _ := recordbatch.ParseHeader(b); h.BaseOffset == mid {
				return b
			}
			return thin(b)
		}
		p.split = splitOnceAt(mid)
	}
	cleaned, kept := writeCleaned(t, l, olds, p)
	if len(cleaned) != 2 || atOldBase && cleaned[1].Base() != mid {
		t.Fatalf("%d cleaned segments", len(cleaned))
	}
	want = kept
	for _, b := range logBatches(t, l) {
		if h, _ := recordbatch.ParseHeader(b); h.BaseOffset >= sealed[n].BaseOffset {
			want = append(want, b)
		}
	}
	return olds, cleaned, want
}

func TestReplaceSegmentsSwapsAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	l := mustOpen(t, cfg)
	fillKeyed(t, l, 60)
	before := l.SealedSegments()
	sizeBefore := l.Size()
	olds, cleaned, want := cleanFirst(t, l, 4)
	if err := l.ReplaceSegments(olds, cleaned); err != nil {
		t.Fatalf("ReplaceSegments: %v", err)
	}
	for _, c := range cleaned { // a no-op once committed
		if err := c.Abort(); err != nil {
			t.Fatal(err)
		}
	}
	wantBases := append([]int64{olds[0], cleaned[1].Base()}, bases(before[4:])...)
	check := func(l *Log, when string) {
		t.Helper()
		if got := logBatches(t, l); !sameBatches(got, want) {
			t.Fatalf("%s: log holds %d batches, want %d", when, len(got), len(want))
		}
		if left := cleanerLeftovers(t, dir); len(left) > 0 {
			t.Fatalf("%s: leftover files %v", when, left)
		}
		got := bases(l.SealedSegments())
		if !slices.Equal(got, wantBases) {
			t.Fatalf("%s: sealed segments %v, want %v", when, got, wantBases)
		}
	}
	check(l, "after replace")
	if l.Size() >= sizeBefore || l.Stats().SegmentsReplaced != 4 {
		t.Fatalf("size %d (before %d), stats %+v", l.Size(), sizeBefore, l.Stats())
	}
	fillKeyed(t, l, 5) // appends go on
	want, wantBases = logBatches(t, l), bases(l.SealedSegments())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, cfg)
	check(l, "after clean reopen")
	crash(t, l)
	// Rebuild the indexes from the logs too.
	for _, s := range before[:4] {
		os.Remove(segmentFileName(dir, s.BaseOffset, indexSuffix))
	}
	l = mustOpen(t, cfg)
	defer l.Close()
	check(l, "after crash")
}

func TestReplaceSegmentsRejectsChangesAndMisuse(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	fillKeyed(t, l, 60)
	sealed := l.SealedSegments()
	olds, cleaned, _ := cleanFirst(t, l, 3)
	if _, err := l.NewCleanedSegment(olds[0]); !errors.Is(err, ErrInvalidCleaning) {
		t.Fatalf("second writer at the same base: %v", err)
	}
	// Misuse: wrong first base, a range past the old run, a foreign writer.
	if err := l.ReplaceSegments(olds[1:], cleaned); !errors.Is(err, ErrInvalidCleaning) {
		t.Fatalf("wrong first base: %v", err)
	}
	if err := l.ReplaceSegments(olds[:1], cleaned); !errors.Is(err, ErrInvalidCleaning) {
		t.Fatalf("cleaned past the old run: %v", err)
	}
	other := mustOpen(t, testConfig(t, t.TempDir()))
	defer other.Close()
	foreign, err := other.NewCleanedSegment(olds[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReplaceSegments(olds, []*CleanedSegment{foreign}); !errors.Is(err, ErrInvalidCleaning) {
		t.Fatalf("foreign writer: %v", err)
	}
	foreign.Abort()
	// The active segment is never replaced.
	all := append(bases(sealed), sealed[len(sealed)-1].NextOffset) // the active one's base last
	if err := l.ReplaceSegments(all, cleaned); !errors.Is(err, ErrSegmentsChanged) {
		t.Fatalf("replace including the active segment: %v", err)
	}
	// Retention removes the first old segment meanwhile: nothing changes.
	want := logBatches(t, l)
	if err := l.DeleteRecordsBefore(sealed[1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	want = want[len(segmentBatchesFrom(want, sealed[1].BaseOffset)):]
	if err := l.ReplaceSegments(olds, cleaned); !errors.Is(err, ErrSegmentsChanged) {
		t.Fatalf("replace after retention: %v", err)
	}
	for _, c := range cleaned {
		if err := c.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := c.Append(nil); !errors.Is(err, ErrInvalidCleaning) {
			t.Fatalf("append after abort: %v", err)
		}
	}
	if left := cleanerLeftovers(t, dir); len(left) > 0 {
		t.Fatalf("abort left %v", left)
	}
	if got := logBatches(t, l); !sameBatches(got, want) {
		t.Fatalf("log changed by a rejected replace: %d batches, want %d", len(got), len(want))
	}
	// Offsets must increase inside a cleaned segment.
	c, err := l.NewCleanedSegment(sealed[1].BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	b := segmentBatches(t, l, sealed[1].BaseOffset)
	if err := c.Append(b[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(b[0]); !errors.Is(err, ErrInvalidCleaning) {
		t.Fatalf("decreasing offsets: %v", err)
	}
	if err := c.Append(append(slices.Clone(b[2]), 0)); !errors.Is(err, ErrInvalidCleaning) {
		t.Fatalf("trailing bytes: %v", err)
	}
	bad := slices.Clone(b[2])
	bad[len(bad)-1] ^= 1
	if err := c.Append(bad); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("bad CRC: %v", err)
	}
}

// segmentBatchesFrom returns the prefix of batches below offset.
func segmentBatchesFrom(batches [][]byte, offset int64) [][]byte {
	for i, b := range batches {
		if h, _ := recordbatch.ParseHeader(b); h.BaseOffset >= offset {
			return batches[:i]
		}
	}
	return batches
}

func TestReplaceTwiceSecondSeesChange(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	fillKeyed(t, l, 60)
	olds, cleaned, want := cleanFirst(t, l, 4)
	if err := l.ReplaceSegments(olds, cleaned); err != nil {
		t.Fatal(err)
	}
	// A cleaner that planned on the old segments loses the race.
	stale, _ := writeCleaned(t, l, olds[:1], cleanPolicy{rewrite: func(b []byte) []byte { return b }})
	if err := l.ReplaceSegments(olds, stale); !errors.Is(err, ErrSegmentsChanged) {
		t.Fatalf("stale replace: %v", err)
	}
	for _, c := range stale {
		c.Abort()
	}
	// A second pass over the cleaned segments works (cleaning is repeatable).
	now := bases(l.SealedSegments()[:2])
	again, kept := writeCleaned(t, l, now, cleanPolicy{rewrite: func(b []byte) []byte {
		return thinBatch(t, b, func(off int64) bool { return off%4 != 2 })
	}})
	if err := l.ReplaceSegments(now, again); err != nil {
		t.Fatal(err)
	}
	got := logBatches(t, l)
	if len(got) != len(want) || !sameBatches(got[:len(kept)], kept) {
		t.Fatalf("second pass: %d batches, want %d", len(got), len(want))
	}
}

func TestCleanerCheckpointAndCleanableBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	l := mustOpen(t, cfg)
	fillKeyed(t, l, 60)
	sealed := l.SealedSegments()
	if got := l.CleanerCheckpoint(); got != 0 {
		t.Fatalf("initial checkpoint %d", got)
	}
	if got := bases(l.CleanableSegments(sealed[3].NextOffset)); !slices.Equal(got, bases(sealed[:4])) {
		t.Fatalf("cleanable below %d: %v", sealed[3].NextOffset, got)
	}
	if got := l.CleanableSegments(sealed[3].NextOffset - 1); len(got) != 3 {
		t.Fatalf("cleanable below %d: %d segments", sealed[3].NextOffset-1, len(got))
	}
	if got := l.CleanableSegments(l.LogEndOffset() + 100); len(got) != len(sealed) {
		t.Fatalf("the active segment is cleanable: %d of %d", len(got), len(sealed))
	}
	// Checkpoint inside segment 2: segments 0-1 clean, 2-3 dirty.
	if err := l.SetCleanerCheckpoint(sealed[2].BaseOffset + 1); err != nil {
		t.Fatal(err)
	}
	clean, dirty := l.CleanableBytes(sealed[3].NextOffset)
	if clean != sealed[0].Size+sealed[1].Size || dirty != sealed[2].Size+sealed[3].Size {
		t.Fatalf("clean %d dirty %d", clean, dirty)
	}
	if err := l.SetCleanerCheckpoint(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("checkpoint past the LEO: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, cfg)
	if got := l.CleanerCheckpoint(); got != sealed[2].BaseOffset+1 {
		t.Fatalf("checkpoint after reopen %d", got)
	}
	// Below the log start it reads as the log start.
	if err := l.DeleteRecordsBefore(sealed[3].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if got := l.CleanerCheckpoint(); got != sealed[3].BaseOffset {
		t.Fatalf("checkpoint below the log start reads %d", got)
	}
	// Truncation pulls it down, durably.
	if err := l.SetCleanerCheckpoint(sealed[5].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(sealed[4].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if got := l.CleanerCheckpoint(); got != sealed[4].BaseOffset {
		t.Fatalf("checkpoint after truncate %d", got)
	}
	fillKeyed(t, l, 20)
	crash(t, l)
	l = mustOpen(t, cfg)
	defer l.Close()
	if got := l.CleanerCheckpoint(); got != sealed[4].BaseOffset {
		t.Fatalf("checkpoint after truncate and crash %d", got)
	}
}

func TestEmptyCleanedFirstSegmentKeepsLogStart(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	l := mustOpen(t, cfg)
	defer l.Close()
	fillKeyed(t, l, 40)
	sealed := l.SealedSegments()
	empty, err := l.NewCleanedSegment(sealed[0].BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReplaceSegments([]int64{sealed[0].BaseOffset}, []*CleanedSegment{empty}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 0 || l.SealedSegments()[0].BaseOffset != 0 {
		t.Fatalf("log start %d after retention over an emptied first segment", l.LogStartOffset())
	}
	b, err := l.Read(0, 1, l.LogEndOffset())
	if h, _ := recordbatch.ParseHeader(b); err != nil || h.BaseOffset != sealed[1].BaseOffset {
		t.Fatalf("Read(0) = batch at %d, %v; want the next segment's first", h.BaseOffset, err)
	}
}

func TestReplaceAfterTruncateOrResetIsRejected(t *testing.T) {
	for _, change := range []string{"truncate", "reset"} {
		dir := t.TempDir()
		l := mustOpen(t, testConfig(t, dir))
		fillKeyed(t, l, 60)
		sealed := l.SealedSegments()
		if err := l.SetCleanerCheckpoint(sealed[4].BaseOffset); err != nil {
			t.Fatal(err)
		}
		olds, cleaned, _ := cleanFirst(t, l, 3)
		var err error
		if change == "truncate" { // the run's last segment becomes the active one
			err = l.Truncate(sealed[2].BaseOffset + 4)
		} else {
			err = l.ResetTo(l.LogEndOffset() + 10)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := logBatches(t, l)
		if err := l.ReplaceSegments(olds, cleaned); !errors.Is(err, ErrSegmentsChanged) {
			t.Fatalf("%s: replace: %v", change, err)
		}
		for _, c := range cleaned {
			c.Abort()
		}
		if got := logBatches(t, l); !sameBatches(got, want) {
			t.Fatalf("%s: log changed", change)
		}
		// What follows the truncation point will be new: dirty again.
		if got, max := l.CleanerCheckpoint(), l.LogEndOffset(); got > max || got == sealed[4].BaseOffset {
			t.Fatalf("%s: checkpoint %d, log end %d", change, got, max)
		}
		if left := cleanerLeftovers(t, dir); len(left) > 0 {
			t.Fatalf("%s: leftovers %v", change, left)
		}
		l.Close()
	}
}
