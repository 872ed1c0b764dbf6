package hotlog

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// gappedReplace replaces the first four sealed segments with: an empty
// segment; one missing the first and last batch of its old segment; one
// missing its old segment's first batch and holding the next old segment
// thinned (every other batch dropped, records at offsets != 0 mod 5
// dropped, batches left empty kept) without its last batch.
func gappedReplace(t *testing.T, l *Log) {
	t.Helper()
	sealed := l.SealedSegments()
	olds := bases(sealed[:4])
	b1, b2, b3 := segmentBatches(t, l, olds[1]), segmentBatches(t, l, olds[2]), segmentBatches(t, l, olds[3])
	var cleaned []*CleanedSegment
	add := func(base int64, batches [][]byte) {
		c, err := l.NewCleanedSegment(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if err := c.Append(b); err != nil {
				t.Fatal(err)
			}
		}
		cleaned = append(cleaned, c)
	}
	add(olds[0], nil)
	add(olds[1], b1[1:len(b1)-1])
	third := slices.Clone(b2[1:])
	for i, b := range b3[:len(b3)-1] {
		if i%2 == 0 {
			third = append(third, thinBatch(t, b, func(off int64) bool { return off%5 == 0 }))
		}
	}
	add(olds[2], third)
	if err := l.ReplaceSegments(olds, cleaned); err != nil {
		t.Fatal(err)
	}
}

// recordAt is one record of the model: its offset and timestamp.
type recordAt struct{ offset, ts int64 }

// checkGappedReads compares Read and OffsetForTimestamp at every offset
// and timestamp with the model built from the log's batches.
func checkGappedReads(t *testing.T, l *Log, model [][]byte) {
	t.Helper()
	var recs []recordAt
	for _, b := range model {
		h, _ := recordbatch.ParseHeader(b)
		rs, err := recordbatch.DecodeRecords(b, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			recs = append(recs, recordAt{h.BaseOffset + int64(r.OffsetDelta), h.FirstTimestamp + r.TimestampDelta64})
		}
	}
	leo := l.LogEndOffset()
	for o := l.LogStartOffset(); o < leo; o++ {
		got, err := l.Read(o, 1, leo)
		if err != nil {
			t.Fatalf("Read(%d): %v", o, err)
		}
		i := slices.IndexFunc(model, func(b []byte) bool { h, _ := recordbatch.ParseHeader(b); return h.LastOffset() >= o })
		if i < 0 {
			if len(got) != 0 {
				t.Fatalf("Read(%d) past the last batch returned %d bytes", o, len(got))
			}
			continue
		}
		if len(got) < len(model[i]) || !slices.Equal(got[:len(model[i])], model[i]) {
			h, _ := recordbatch.ParseHeader(got)
			want, _ := recordbatch.ParseHeader(model[i])
			t.Fatalf("Read(%d) returned the batch at %d, want %d", o, h.BaseOffset, want.BaseOffset)
		}
	}
	for ts := int64(990); ts <= 1000+leo+1; ts++ {
		got, ok, err := l.OffsetForTimestamp(ts, leo)
		j := slices.IndexFunc(recs, func(r recordAt) bool { return r.ts >= ts })
		switch {
		case err != nil:
			t.Fatalf("OffsetForTimestamp(%d): %v", ts, err)
		case ok != (j >= 0):
			t.Fatalf("OffsetForTimestamp(%d) found %v (%+v)", ts, ok, got)
		case ok && (got.Offset != recs[j].offset || got.Timestamp != recs[j].ts):
			t.Fatalf("OffsetForTimestamp(%d) = %+v, want %+v", ts, got, recs[j])
		}
	}
}

func TestReadsAcrossGaps(t *testing.T) {
	for _, interval := range []int{0, 256} {
		dir := t.TempDir()
		cfg := testConfig(t, dir)
		cfg.IndexIntervalBytes = interval
		l := mustOpen(t, cfg)
		fillKeyed(t, l, 60)
		gappedReplace(t, l)
		model := logBatches(t, l)
		sealed := l.SealedSegments()
		for i, s := range sealed[:len(sealed)-1] {
			if s.RangeEnd != sealed[i+1].BaseOffset || s.NextOffset > s.RangeEnd {
				t.Fatalf("segment %d: %+v, next base %d", i, s, sealed[i+1].BaseOffset)
			}
		}
		if s := sealed[0]; s.Size != 0 || s.NextOffset != s.BaseOffset {
			t.Fatalf("emptied first segment: %+v", s)
		}
		if s := sealed[1]; s.NextOffset >= s.RangeEnd {
			t.Fatalf("segment without its last batch: %+v", s)
		}
		checkGappedReads(t, l, model)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, cfg)
		checkGappedReads(t, l, model)
		segs := bases(l.SealedSegments())
		crash(t, l)
		for _, s := range segs { // indexes are rebuilt from the logs
			os.Remove(segmentFileName(dir, s, indexSuffix))
			os.Remove(segmentFileName(dir, s, timeIndexSuffix))
		}
		l = mustOpen(t, cfg)
		checkGappedReads(t, l, model)
		if got := logBatches(t, l); !sameBatches(got, model) {
			t.Fatalf("after crash: %d batches, want %d", len(got), len(model))
		}
		l.Close()
	}
}

func TestReplaceCarriesAbortedTxns(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	l := mustOpen(t, cfg)
	ts := int64(1000)
	fillUntilRoll := func() {
		for n := len(l.SealedSegments()); len(l.SealedSegments()) == n; {
			mustAppend(t, l, simpleBatch(t, 2, ts, 200), 1)
		}
	}
	mustAppend(t, l, txnBatch(t, 9, 0, 0, 2, ts), 1) // producer 9's transaction starts in segment 0
	fillUntilRoll()
	p7 := mustAppend(t, l, txnBatch(t, 7, 0, 0, 2, ts), 1)
	m7 := mustAppend(t, l, MarkerBatch(7, 0, false, 1, ts), 1)
	p8 := mustAppend(t, l, txnBatch(t, 8, 0, 0, 2, ts), 1)
	m8 := mustAppend(t, l, MarkerBatch(8, 0, false, 1, ts), 1)
	m9 := mustAppend(t, l, MarkerBatch(9, 0, false, 1, ts), 1)
	fillUntilRoll()
	fillUntilRoll()
	if got := l.AbortedTxns(0, l.LogEndOffset()); len(got) != 3 {
		t.Fatalf("aborts before cleaning: %+v", got)
	}
	// Clean segments 1-2: aborted data goes, 7's marker stays, 8's and 9's go.
	drop := map[int64]bool{p7.BaseOffset: true, p8.BaseOffset: true, m8.BaseOffset: true, m9.BaseOffset: true}
	olds := bases(l.SealedSegments()[1:3])
	cleaned, _ := writeCleaned(t, l, olds, cleanPolicy{rewrite: func(b []byte) []byte {
		if h, _ := recordbatch.ParseHeader(b); drop[h.BaseOffset] {
			return nil
		}
		return b
	}})
	if err := l.ReplaceSegments(olds, cleaned); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		got := l.AbortedTxns(0, l.LogEndOffset())
		if len(got) != 2 || got[0].ProducerID != 7 || got[0].LastOffset != m7.BaseOffset ||
			got[1].ProducerID != 9 || got[1].LastOffset != m9.BaseOffset {
			t.Fatalf("%s: aborts %+v", when, got)
		}
	}
	check("after replace")
	l.Close()
	l = mustOpen(t, cfg)
	check("after reopen")
	crash(t, l)
	l = mustOpen(t, cfg)
	defer l.Close()
	check("after crash")
}

// TestReadersDuringReplace runs readers, the uploader's OpenSealedSegment,
// timestamp look-ups and an appender against three cleaning passes: every
// batch read is an original or a cleaned version of itself, offsets only
// increase, and a batch no pass drops is never missed.
func TestReadersDuringReplace(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	fillKeyed(t, l, 80)
	end := l.SealedSegments()[len(l.SealedSegments())-1].NextOffset
	var allowed sync.Map // base offset -> map[crc]bool, written before each replace
	allow := func(batches [][]byte) {
		for _, b := range batches {
			h, _ := recordbatch.ParseHeader(b)
			m, _ := allowed.LoadOrStore(h.BaseOffset, &sync.Map{})
			m.(*sync.Map).Store(h.CRC, true)
		}
	}
	original := logBatches(t, l)
	allow(original)
	var mandatory []int64 // never dropped: (base/4)%4 == 0
	for _, b := range original {
		if h, _ := recordbatch.ParseHeader(b); h.BaseOffset < end && (h.BaseOffset/4)%4 == 0 {
			mandatory = append(mandatory, h.BaseOffset)
		}
	}
	checkBatch := func(b []byte) error {
		h, err := recordbatch.CheckStored(b)
		if err != nil || h.BaseOffset >= end {
			return err
		}
		m, ok := allowed.Load(h.BaseOffset)
		if !ok {
			return errors.New("a batch at an offset never written")
		}
		if _, ok := m.(*sync.Map).Load(h.CRC); !ok {
			return errors.New("a batch that is no version of itself")
		}
		return nil
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	run := func(f func(rng *rand.Rand) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(len(errs)), 1))
			for !stop.Load() {
				if err := f(rng); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 {
		run(func(*rand.Rand) error { return scanAll(l, end, mandatory, checkBatch) })
	}
	run(func(rng *rand.Rand) error { return uploadOne(l, rng, checkBatch) })
	run(func(rng *rand.Rand) error {
		_, _, err := l.OffsetForTimestamp(1000+rng.Int64N(end), end)
		return err
	})
	run(func(*rand.Rand) error {
		time.Sleep(time.Millisecond)
		_, err := l.Append(simpleBatch(t, 2, 5000, 100), 1)
		return err
	})
	for pass := int64(1); pass <= 3; pass++ {
		olds := bases(l.CleanableSegments(end))
		cleaned, kept := writeCleaned(t, l, olds, cleanPolicy{
			rewrite: func(b []byte) []byte {
				if h, _ := recordbatch.ParseHeader(b); (h.BaseOffset/4)%4 == pass {
					return nil
				}
				return thinBatch(t, b, func(off int64) bool { return off%4 != pass })
			},
			split: func(h recordbatch.Header) bool { return h.BaseOffset%20 < 4 },
		})
		allow(kept)
		time.Sleep(20 * time.Millisecond)
		if err := l.ReplaceSegments(olds, cleaned); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// scanAll reads the log up to end as a consumer would and checks it.
func scanAll(l *Log, end int64, mandatory []int64, check func([]byte) error) error {
	next, seen := l.LogStartOffset(), 0
	for next < end {
		b, err := l.Read(next, 1+rand.IntN(8192), end)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				return err
			}
			if err := check(b[:h.Size()]); err != nil {
				return err
			}
			if h.LastOffset() < next {
				return errors.New("offsets went backwards")
			}
			for seen < len(mandatory) && mandatory[seen] < h.BaseOffset {
				return errors.New("a batch no cleaning drops was skipped")
			}
			if seen < len(mandatory) && mandatory[seen] == h.BaseOffset {
				seen++
			}
			next, b = h.LastOffset()+1, b[h.Size():]
		}
	}
	if seen != len(mandatory) {
		return errors.New("a scan missed kept batches")
	}
	return nil
}

// uploadOne opens a random sealed segment as the uploader does and
// checks every batch in it.
func uploadOne(l *Log, rng *rand.Rand, check func([]byte) error) error {
	sealed := l.SealedSegments()
	if len(sealed) == 0 {
		return nil
	}
	s := sealed[rng.IntN(len(sealed))]
	f, size, err := l.OpenSealedSegment(s.BaseOffset)
	if errors.Is(err, ErrOffsetOutOfRange) {
		return nil // replaced since the listing
	}
	if err != nil {
		return err
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && size > 0 {
		return err
	}
	for len(data) > 0 {
		h, err := recordbatch.CheckStored(data)
		if err != nil {
			return err
		}
		if err := check(data[:h.Size()]); err != nil {
			return err
		}
		data = data[h.Size():]
	}
	return nil
}
