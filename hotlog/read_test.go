package hotlog

import (
	"bytes"
	"errors"
	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/recordbatch"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// checkReadResult checks what Read returned for offset: whole batches that
// pass their CRC, with contiguous offsets, the first holding offset.
func checkReadResult(b []byte, offset int64) error {
	next := int64(-1)
	for len(b) > 0 {
		h, err := recordbatch.CheckStored(b)
		if err != nil {
			return err
		}
		switch {
		case next < 0 && (h.BaseOffset > offset || h.LastOffset() < offset):
			return errors.New("first batch does not hold the offset read")
		case next >= 0 && h.BaseOffset != next:
			return errors.New("batches not contiguous")
		}
		next = h.LastOffset() + 1
		b = b[h.Size():]
	}
	return nil
}

// TestReadConcurrentWithTruncateRetentionClose: Read preads without the
// log's lock, so a writer truncates the active segment (and re-appends
// batches of another layout over the same positions), deletes old segments,
// resets the log, and finally closes it while readers hammer the tail and
// the head.
// A reader must only ever get valid, contiguous batches holding its offset,
// or ErrOffsetOutOfRange / ErrClosed: never an I/O error from a closed or
// shortened file, never a corrupt batch, never a panic.
func TestReadConcurrentWithTruncateRetentionClose(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionMs = -1
	l := mustOpen(t, cfg)
	var stop atomic.Bool
	var reads, served atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for !stop.Load() {
				n, err := hammerRead(l, rng)
				reads.Add(1)
				served.Add(int64(n))
				if err != nil {
					errs <- err
					return
				}
			}
		}(uint64(r))
	}
	writeTruncateDelete(t, l, 400)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l.corruptReads.Load() != 0 {
		t.Errorf("%d corrupt reads counted", l.corruptReads.Load())
	}
	if served.Load() == 0 {
		t.Fatalf("readers served nothing in %d reads", reads.Load())
	}
}

// hammerRead reads once near the tail or the head; it returns the bytes
// served and an error only for a wrong answer.
func hammerRead(l *Log, rng *rand.Rand) (int, error) {
	start, leo := l.LogStartOffset(), l.LogEndOffset()
	offset := start + rng.Int64N(leo-start+1)
	if rng.IntN(2) == 0 {
		offset = max(start, leo-rng.Int64N(20))
	}
	var b, backing []byte
	var err error
	if rng.IntN(2) == 0 {
		b, err = l.Read(offset, 64+rng.IntN(4096), leo)
	} else {
		// Pooled, with buffers large enough to come from the pool; the
		// buffer is scribbled on and returned after the check, so a read
		// that kept a reference to a returned buffer would serve junk.
		b, backing, err = l.ReadPooled(offset, bufpool.MinPooled+rng.IntN(4096), leo)
		defer func() { clear(backing[:cap(backing)]); bufpool.Put(backing) }()
	}
	switch {
	case errors.Is(err, ErrOffsetOutOfRange), errors.Is(err, ErrClosed):
		return 0, nil
	case err != nil:
		return 0, err
	}
	if err := checkReadResult(b, offset); err != nil {
		return 0, err
	}
	return len(b), nil
}

// writeTruncateDelete appends batches of varying size, truncating the tail
// every few rounds, deleting the oldest records now and then, and sometimes
// resetting the log past its end (a follower behind the leader's start).
func writeTruncateDelete(t *testing.T, l *Log, rounds int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(42, 7))
	for i := 0; i < rounds; i++ {
		mustAppend(t, l, simpleBatch(t, 1+rng.IntN(4), int64(i), 20+rng.IntN(300)), 1)
		leo := l.LogEndOffset()
		switch {
		case i%7 == 6:
			if err := l.Truncate(max(l.LogStartOffset(), leo-1-rng.Int64N(8))); err != nil {
				t.Fatal(err)
			}
		case i%50 == 49:
			if err := l.DeleteRecordsBefore(leo - 40); err != nil {
				t.Fatal(err)
			}
		case i%97 == 96:
			if err := l.ResetTo(leo + 10); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReadPooledMatchesRead: pooled reads return what Read returns, from
// buffers that are reused (scribbled on in between) without mixing up data.
func TestReadPooledMatchesRead(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	for i := range 120 {
		mustAppend(t, l, simpleBatch(t, 3, int64(i), 3000), 1)
	}
	leo := l.LogEndOffset()
	for round := range 3 {
		for offset := int64(0); offset < leo; offset += 7 {
			want, err := l.Read(offset, 256<<10, leo)
			if err != nil {
				t.Fatal(err)
			}
			got, backing, err := l.ReadPooled(offset, 256<<10, leo)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d offset %d: pooled read differs (%d vs %d bytes)", round, offset, len(got), len(want))
			}
			if len(got) > 0 && (backing == nil || &backing[:cap(backing)][cap(backing)-1] != &got[:cap(got)][cap(got)-1]) {
				t.Fatalf("offset %d: data is not a slice of its backing buffer", offset)
			}
			clear(backing[:cap(backing)])
			bufpool.Put(backing)
		}
	}
}
