package tier

// Merging small objects (DESIGN.md §5, "The bucket is current"): a leader
// rolls a trickling partition's active segment every half
// tier.upload.max.lag.ms, so the bucket gets many small objects. PlanMerges
// picks runs of them to merge back into objects of up to segment.bytes;
// the caller runs each through Compactor.Compact with CopyBatches, so a
// merged object is an ordinary segment object (doc.go, "Merging small
// objects"). PlanMerges is pure: no clock, no I/O.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/strata-log/strata/metadata"
)

// MergePolicy says which of a partition's objects PlanMerges may merge.
type MergePolicy struct {
	// TargetBytes bounds a merged object (the topic's segment.bytes): a
	// run's object sizes add up to at most this, so the Compactor writes
	// exactly one object for it. <= 0 plans nothing.
	TargetBytes int64
	// Now and Grace: an object joins a run only once its newest record
	// is Grace old (MaxTimestamp <= Now-Grace; see "Age" in doc.go).
	Now   time.Time
	Grace time.Duration
	// MaxSpanMs bounds the time a merged object covers (segment.ms: its
	// newest MaxTimestamp minus its oldest FirstTimestamp), so retention.ms
	// deletes merged history no later than it would have deleted a whole
	// segment. <= 0: no bound.
	MaxSpanMs int64
	// Below: only entries wholly below this offset (LastOffset < Below)
	// are merged; math.MaxInt64 for all of them.
	Below int64
	// Keep lists offsets that must stay object boundaries: no run holds
	// both an entry ending just before one and the entry starting at it.
	Keep []int64
	// MaxRunObjects bounds a run (the Compactor's MaxRunObjects). Default
	// DefaultMaxRunObjects.
	MaxRunObjects int
}

// MergeRun is one planned merge: its entries become one object.
type MergeRun struct {
	Entries []metadata.TierEntry
	Bytes   int64 // the entries' object bytes
	// Reason says why this run is worth its rewrite, for logs and tests.
	Reason string
}

// String renders a run on one line, e.g. "[0, 99] 4 objects 3000 bytes: fills an object".
func (r MergeRun) String() string {
	return fmt.Sprintf("[%d, %d] %d objects %d bytes: %s", r.Entries[0].BaseOffset,
		r.Entries[len(r.Entries)-1].LastOffset, len(r.Entries), r.Bytes, r.Reason)
}

// Reasons a run is merged.
const (
	mergeHalves = "no object holds half the bytes"
	mergeFills  = "fills an object"
)

// fullFraction: an object at least this part of TargetBytes is full: it is
// never merged, and a run whose merge reaches it is worth its rewrite. 5/6
// keeps full objects within 1.2x of the count of target-sized ones.
const fullNum, fullDen = 5, 6

// PlanMerges returns the runs to merge among entries (one partition's
// manifest, sorted by offset), oldest first, none overlapping. A run is 2
// to MaxRunObjects consecutive candidates, contiguous in offsets and not
// across a Keep boundary, of at most TargetBytes and MaxSpanMs. A
// candidate is an entry below Below, old enough, and not full (see
// fullFraction). A run is worth merging when no member holds more than half
// of its bytes, or when the merged object is full. Scanning from the
// oldest entry, each start takes its longest worth-merging run, or moves on
// by one entry.
//
// Why these rules: every merge removes at least one object, so merges
// never cost more requests than the uploads they follow; the halving rule
// means every byte rewritten lands in an object at least twice the size of
// the one it came from, so a byte is copied at most log2(target/its first
// object) times plus once to fill an object, and a trickle of equal small
// objects leaves about that many objects unmerged; the fill rule turns the
// last half-sized objects into full ones instead of leaving them at half.
func PlanMerges(entries []metadata.TierEntry, pol MergePolicy) []MergeRun {
	if pol.TargetBytes <= 0 {
		return nil
	}
	if pol.MaxRunObjects <= 0 {
		pol.MaxRunObjects = DefaultMaxRunObjects
	}
	var runs []MergeRun
	for i := 0; i < len(entries); {
		n, bytes, reason := pol.longestRun(entries[i:])
		if n < 2 {
			i++
			continue
		}
		runs = append(runs, MergeRun{Entries: entries[i : i+n], Bytes: bytes, Reason: reason})
		i += n
	}
	return runs
}

// longestRun returns the length of the longest worth-merging run at the
// start of entries (0 if none), its bytes and why.
func (pol MergePolicy) longestRun(entries []metadata.TierEntry) (n int, bytes int64, reason string) {
	if len(entries) == 0 {
		return 0, 0, ""
	}
	var total, largest int64
	first, newest := entries[0].FirstTimestamp, entries[0].MaxTimestamp
	for k, e := range entries[:min(len(entries), pol.MaxRunObjects)] {
		if !pol.candidate(e) || (k > 0 && !pol.joins(entries[k-1], e)) {
			break
		}
		total, largest = total+e.Size, max(largest, e.Size)
		first, newest = min(first, e.FirstTimestamp), max(newest, e.MaxTimestamp)
		if total > pol.TargetBytes || (pol.MaxSpanMs > 0 && newest-first > pol.MaxSpanMs) {
			break
		}
		switch {
		case k == 0:
		case pol.full(total):
			n, bytes, reason = k+1, total, mergeFills
		case 2*largest <= total:
			n, bytes, reason = k+1, total, mergeHalves
		}
	}
	return n, bytes, reason
}

// candidate: e may join a run.
func (pol MergePolicy) candidate(e metadata.TierEntry) bool {
	return e.LastOffset < pol.Below && !pol.full(e.Size) &&
		e.MaxTimestamp <= pol.Now.Add(-pol.Grace).UnixMilli()
}

// joins: e may follow prev in a run.
func (pol MergePolicy) joins(prev, e metadata.TierEntry) bool {
	return e.BaseOffset == prev.LastOffset+1 && !slices.Contains(pol.Keep, e.BaseOffset)
}

// full: an object of size bytes needs no merging.
func (pol MergePolicy) full(size int64) bool {
	return size*fullDen >= pol.TargetBytes*fullNum
}

// CopyBatches is the RewriteFunc of a merge: every batch unchanged, in
// order (no decompression; offsets, timestamps and CRCs as they were).
func CopyBatches(batches BatchSource, sink func(batch []byte) error) error {
	for {
		batch, err := batches.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := sink(batch); err != nil {
			return err
		}
	}
}

var _ RewriteFunc = CopyBatches
