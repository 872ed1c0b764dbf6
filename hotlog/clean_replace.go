package hotlog

// ReplaceSegments: swapping a run of sealed segments for the
// cleaned segments written from them, crash-safely (doc.go, "Compaction").

import (
	"fmt"
	"slices"

	"github.com/strata-log/strata/recordbatch"
)

// replacePlan is a validated replacement, captured under mu.
type replacePlan struct {
	oldBases []int64
	olds     []*segment
	aborted  [][]AbortedTxn // each old segment's aborted-txn index at capture
	cleaned  []*CleanedSegment
	end      int64 // one past the last offset of the old run
}

// ReplaceSegments atomically replaces the contiguous run of sealed
// segments named by oldBases with cleaned, which must have been written
// from them: cleaned[0].Base() == oldBases[0], bases strictly increasing,
// each segment's batches below the next one's base and all below the old
// run's end. The aborted-transaction entries of the old run carry over to
// the new segment holding their marker's offset, for the transactions
// whose marker or data the cleaned segments kept (or that began before
// the run).
//
// Crash safety: the commit point is the swap marker (doc.go,
// "Compaction"); a crash before it leaves the old segments, after it Open
// completes the swap. On success the cleaned segments belong to the log
// (Abort is then a no-op). ErrSegmentsChanged: the old run was changed or
// removed meanwhile; nothing was done and the caller aborts the cleaned
// segments. Other errors before the commit point likewise change nothing;
// a failure after it fences the log (ErrStorage) until Open finishes the
// swap. Reads in flight see the old or the new segments, never a mix.
func (l *Log) ReplaceSegments(oldBases []int64, cleaned []*CleanedSegment) error {
	l.cleaner.replaceMu.Lock()
	defer l.cleaner.replaceMu.Unlock()
	stop := l.cleaner.stopper()
	if err := checkCleanedArgs(l, oldBases, cleaned); err != nil {
		return err
	}
	plan, err := l.planReplace(oldBases, cleaned)
	if err != nil {
		return err
	}
	if err := plan.prepare(); err != nil {
		return fmt.Errorf("hotlog: prepare cleaned segments: %w", err)
	}
	if stopAt(stop) {
		return errSimulatedCrash
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkPlan(plan); err != nil {
		return err
	}
	err = l.commitReplace(plan, stop)
	// Released only now: a new writer at one of these bases would truncate
	// a committed .cleaned file not yet renamed. (After a failure the log
	// is fenced and no writer can start.)
	for _, c := range cleaned {
		l.cleaner.release(c.Base())
	}
	if err != nil {
		plan.closeUnpublished()
		return l.fail(fmt.Errorf("replace segments %v: %w", oldBases, err))
	}
	return nil
}

// stopper returns the crash hook of one replace, counting its steps.
// REQUIRES: replaceMu held.
func (c *cleanerState) stopper() func() bool {
	if c.crashAfter == nil {
		return nil
	}
	hook, step := c.crashAfter, 0
	return func() bool {
		step++
		return hook(step)
	}
}

// checkCleanedArgs checks what does not depend on the log's state.
func checkCleanedArgs(l *Log, oldBases []int64, cleaned []*CleanedSegment) error {
	if len(oldBases) == 0 || len(cleaned) == 0 {
		return fmt.Errorf("%w: %d old, %d cleaned segments", ErrInvalidCleaning, len(oldBases), len(cleaned))
	}
	for i := 1; i < len(oldBases); i++ {
		if oldBases[i] <= oldBases[i-1] {
			return fmt.Errorf("%w: old bases not increasing", ErrInvalidCleaning)
		}
	}
	if cleaned[0] == nil || cleaned[0].Base() != oldBases[0] {
		return fmt.Errorf("%w: the first cleaned segment must be named %d", ErrInvalidCleaning, oldBases[0])
	}
	for i, c := range cleaned {
		switch {
		case c == nil || c.l != l || c.state != cleanedOpen:
			return fmt.Errorf("%w: cleaned segment %d is not an open writer of this log", ErrInvalidCleaning, i)
		case i > 0 && c.Base() < cleaned[i-1].NextOffset() || i > 0 && c.Base() <= cleaned[i-1].Base():
			return fmt.Errorf("%w: cleaned segment %d overlaps the one before", ErrInvalidCleaning, c.Base())
		}
	}
	return nil
}

// planReplace finds the old run among the sealed segments.
func (l *Log) planReplace(oldBases []int64, cleaned []*CleanedSegment) (*replacePlan, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	i := l.segmentForLocked(oldBases[0])
	segs := l.mu.segments
	if i+len(oldBases) > len(segs)-1 {
		return nil, fmt.Errorf("%w: %v are not all sealed segments", ErrSegmentsChanged, oldBases)
	}
	p := &replacePlan{oldBases: oldBases, cleaned: cleaned}
	for j, base := range oldBases {
		s := segs[i+j]
		if s.base != base {
			return nil, fmt.Errorf("%w: no segment %d in its place", ErrSegmentsChanged, base)
		}
		p.olds = append(p.olds, s)
		p.aborted = append(p.aborted, slices.Clone(s.aborted))
	}
	p.end = p.olds[len(p.olds)-1].next
	for _, c := range cleaned {
		if c.NextOffset() > p.end || (c.Base() != oldBases[0] && c.Base() >= p.end) {
			return nil, fmt.Errorf("%w: cleaned segment %d [.., %d) outside the old run ending at %d",
				ErrInvalidCleaning, c.Base(), c.NextOffset(), p.end)
		}
	}
	return p, nil
}

// checkPlan verifies, with appendMu held, that the old run is still in
// place, sealed and unchanged. REQUIRES: appendMu held.
func (l *Log) checkPlan(p *replacePlan) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	i := slices.Index(l.mu.segments, p.olds[0])
	if i < 0 || i+len(p.olds) > len(l.mu.segments)-1 {
		return fmt.Errorf("%w: segment %d gone or active", ErrSegmentsChanged, p.oldBases[0])
	}
	for j, s := range p.olds {
		if l.mu.segments[i+j] != s || !slices.Equal(s.aborted, p.aborted[j]) {
			return fmt.Errorf("%w: segment %d changed", ErrSegmentsChanged, s.base)
		}
	}
	return nil
}

// prepare makes the cleaned segments complete and durable as .cleaned
// files, with the aborted-transaction entries that carry over.
func (p *replacePlan) prepare() error {
	for _, c := range p.cleaned {
		if err := c.w.Flush(); err != nil {
			return err
		}
	}
	perSegment, err := p.carriedAborts()
	if err != nil {
		return err
	}
	for i, c := range p.cleaned {
		if err := c.prepare(perSegment[i]); err != nil {
			return err
		}
	}
	return nil
}

// carriedAborts assigns the old run's aborted-transaction entries that
// still matter to the cleaned segment holding their marker's offset. An
// entry matters when the transaction began before the run (its data may
// lie in earlier segments) or a batch of its producer inside
// [FirstOffset, LastOffset] (data or the marker) was kept.
func (p *replacePlan) carriedAborts() ([][]AbortedTxn, error) {
	var entries []AbortedTxn
	for _, a := range p.aborted {
		entries = append(entries, a...)
	}
	keep := make([]bool, len(entries))
	byProducer := map[int64][]int{}
	for i, a := range entries {
		keep[i] = a.FirstOffset < p.oldBases[0]
		byProducer[a.ProducerID] = append(byProducer[a.ProducerID], i)
	}
	if len(entries) > 0 {
		if err := p.markKeptAborts(entries, byProducer, keep); err != nil {
			return nil, err
		}
	}
	out := make([][]AbortedTxn, len(p.cleaned))
	k := 0
	for i, a := range entries {
		for k+1 < len(p.cleaned) && a.LastOffset >= p.cleaned[k+1].Base() {
			k++
		}
		if keep[i] {
			out[k] = append(out[k], a)
		}
	}
	return out, nil
}

// markKeptAborts scans the cleaned segments' batch headers for batches of
// the aborted transactions. REQUIRES: the writers flushed.
func (p *replacePlan) markKeptAborts(entries []AbortedTxn, byProducer map[int64][]int, keep []bool) error {
	for _, c := range p.cleaned {
		err := c.seg.forEachHeader(0, func(_ int64, h recordbatch.Header) bool {
			for _, i := range byProducer[h.ProducerID] {
				if a := entries[i]; h.ProducerID >= 0 && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
					keep[i] = true
				}
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// commitReplace writes the commit point, moves the files and publishes
// the new segment list. REQUIRES: replaceMu and appendMu held; plan checked.
func (l *Log) commitReplace(p *replacePlan, stop func() bool) error {
	m := swapMarker{old: p.oldBases}
	for _, c := range p.cleaned {
		m.new = append(m.new, c.Base())
	}
	// From here on the files may be named by a durable marker: they belong
	// to the log whatever happens, and Abort must not remove them.
	for _, c := range p.cleaned {
		c.state = cleanedCommitted
	}
	if err := writeFileAtomic(l.dir, swapMarkerFile, encodeSwapMarker(m)); err != nil {
		return err
	}
	if stopAt(stop) {
		return errSimulatedCrash
	}
	if err := swapFiles(l.dir, m, stop); err != nil {
		return err
	}
	l.publishReplace(p)
	return finishSwap(l.dir, stop)
}

// publishReplace swaps the segment list in one critical section and
// closes the old segments' files (bumping their generations, so a read in
// flight on them starts over on the new list).
// REQUIRES: appendMu held; the files are in place.
func (l *Log) publishReplace(p *replacePlan) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.mu.segments, p.olds[0])
	news := make([]*segment, len(p.cleaned))
	for j, c := range p.cleaned {
		news[j] = c.seg
	}
	l.mu.segments = slices.Concat(l.mu.segments[:i], news, l.mu.segments[i+len(p.olds):])
	l.mu.unsynced = without(l.mu.unsynced, p.olds)
	for _, s := range p.olds {
		if err := s.closeFiles(); err != nil {
			l.logger.Warn("hotlog: closing a replaced segment", "dir", l.dir, "segment", s.base, "err", err)
		}
	}
	p.cleaned = nil // published: the files are the segments' now
	l.mu.stats.SegmentsReplaced += int64(len(p.olds))
}

// closeUnpublished closes the cleaned files of a replace that failed
// before publishing (the fenced log's Open decides their fate).
func (p *replacePlan) closeUnpublished() {
	for _, c := range p.cleaned {
		if c.state == cleanedCommitted {
			c.seg.file.Close()
		}
	}
}
