package diskless

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/strata-log/strata/metadata"
)

// Watcher is the slice of etcd the Index follows (*metadata.Store).
type Watcher interface {
	LoadDiskless(ctx context.Context) (metadata.DisklessSnapshot, error)
	WatchDiskless(ctx context.Context, rev int64) <-chan metadata.DisklessEvent
}

// Index mirrors the committed coordinates of every diskless partition: a
// snapshot, then the watch from its revision, reloaded when etcd compacted
// the watched revision. Reads never block on etcd.
//
// Invariant: for each partition, runs are sorted by base offset and do not
// overlap; changed is closed (and replaced) whenever the head moves.
type Index struct {
	w   Watcher
	log *slog.Logger

	mu     sync.RWMutex
	parts  map[metadata.TierPartition]*partIndex // guarded by mu
	loaded bool                                  // guarded by mu
	ready  chan struct{}                         // closed after the first load
}

type partIndex struct {
	start, next int64
	runs        []indexedRun
	changed     chan struct{}
}

// indexedRun is a run with its offsets.
type indexedRun struct {
	base, end int64 // [base, end)
	run       Run
}

// NewIndex returns an empty index; Run fills and follows it.
func NewIndex(w Watcher, log *slog.Logger) *Index {
	if log == nil {
		log = slog.Default()
	}
	return &Index{w: w, log: log, parts: map[metadata.TierPartition]*partIndex{}, ready: make(chan struct{})}
}

// Ready is closed once the index holds a full snapshot.
func (ix *Index) Ready() <-chan struct{} { return ix.ready }

// Run loads and follows etcd until ctx ends.
func (ix *Index) Run(ctx context.Context) {
	for ctx.Err() == nil {
		snap, err := ix.w.LoadDiskless(ctx)
		if err != nil {
			ix.log.Warn("diskless index: load failed, retrying", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		ix.replace(snap)
		for ev := range ix.w.WatchDiskless(ctx, snap.Revision+1) {
			if ev.Kind == metadata.DisklessResync {
				ix.log.Info("diskless index: etcd compacted the history the watch needed, reloading", "snapshot_revision", snap.Revision)
				break
			}
			ix.apply(ev)
		}
	}
}

func (ix *Index) replace(snap metadata.DisklessSnapshot) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := ix.parts
	ix.parts = map[metadata.TierPartition]*partIndex{}
	for _, h := range snap.Heads {
		ix.putHeadLocked(h.Partition, h.Value)
	}
	for _, r := range snap.Runs {
		ix.putRunLocked(r.Partition, r.BaseOffset, r.Value)
	}
	for _, p := range old {
		close(p.changed) // whatever moved, waiters look again
	}
	if !ix.loaded {
		ix.loaded = true
		close(ix.ready)
	}
}

func (ix *Index) apply(ev metadata.DisklessEvent) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	switch ev.Kind {
	case metadata.DisklessHeadPut:
		ix.putHeadLocked(ev.Partition, ev.Value)
	case metadata.DisklessHeadDeleted:
		if p, ok := ix.parts[ev.Partition]; ok {
			close(p.changed)
			delete(ix.parts, ev.Partition)
		}
	case metadata.DisklessRunPut:
		ix.putRunLocked(ev.Partition, ev.BaseOffset, ev.Value)
	case metadata.DisklessRunDeleted:
		if p, ok := ix.parts[ev.Partition]; ok {
			i := sort.Search(len(p.runs), func(i int) bool { return p.runs[i].base >= ev.BaseOffset })
			if i < len(p.runs) && p.runs[i].base == ev.BaseOffset {
				p.runs = append(p.runs[:i], p.runs[i+1:]...)
			}
		}
	}
}

func (ix *Index) part(tp metadata.TierPartition) *partIndex {
	p, ok := ix.parts[tp]
	if !ok {
		p = &partIndex{changed: make(chan struct{})}
		ix.parts[tp] = p
	}
	return p
}

func (ix *Index) putHeadLocked(tp metadata.TierPartition, v []byte) {
	h, err := decodeHead(v)
	if err != nil {
		ix.log.Error("diskless index: ignoring head", "partition", tp, "err", err)
		return
	}
	p := ix.part(tp)
	p.start, p.next = h.Start, h.Next
	close(p.changed)
	p.changed = make(chan struct{})
}

func (ix *Index) putRunLocked(tp metadata.TierPartition, base int64, v []byte) {
	r, err := decodeRun(v)
	if err != nil {
		ix.log.Error("diskless index: ignoring run", "partition", tp, "base", base, "err", err)
		return
	}
	p := ix.part(tp)
	ir := indexedRun{base: base, end: base + r.Records(), run: r}
	i := sort.Search(len(p.runs), func(i int) bool { return p.runs[i].base >= base })
	if i < len(p.runs) && p.runs[i].base == base {
		p.runs[i] = ir
		return
	}
	p.runs = append(p.runs, indexedRun{})
	copy(p.runs[i+1:], p.runs[i:])
	p.runs[i] = ir
}

// Positions returns a partition's log start and end, and a channel closed
// when they next move. A partition never committed to is empty at 0.
func (ix *Index) Positions(tp metadata.TierPartition) (start, next int64, changed <-chan struct{}) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p := ix.part(tp)
	return p.start, p.next, p.changed
}

// runsFrom returns copies of the partition's runs from the one holding
// offset on, at most n.
func (ix *Index) runsFrom(tp metadata.TierPartition, offset int64, n int) []indexedRun {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	p, ok := ix.parts[tp]
	if !ok {
		return nil
	}
	i := sort.Search(len(p.runs), func(i int) bool { return p.runs[i].end > offset })
	if i == len(p.runs) || p.runs[i].base > offset {
		return nil
	}
	return append([]indexedRun(nil), p.runs[i:min(i+n, len(p.runs))]...)
}

// runsOf returns copies of the partition's first n runs.
func (ix *Index) runsOf(tp metadata.TierPartition, n int) []indexedRun {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	p, ok := ix.parts[tp]
	if !ok {
		return nil
	}
	return append([]indexedRun(nil), p.runs[:min(n, len(p.runs))]...)
}

// firstRunBase is the base offset of the partition's first run; ok false
// when it has none. Offsets below it (and at or above the log start) were
// merged into the bucket's segment objects.
func (ix *Index) firstRunBase(tp metadata.TierPartition) (int64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	p, ok := ix.parts[tp]
	if !ok || len(p.runs) == 0 {
		return 0, false
	}
	return p.runs[0].base, true
}

// MergedEnd is one past the partition's last merged offset as the index
// sees it: its first run's base, or its log end when no run is left. The
// bucket's segment objects below it hold only merged batches no run still
// covers; an object reaching it may belong to a merge still deleting its
// runs. 0 before the index is loaded.
func (ix *Index) MergedEnd(tp metadata.TierPartition) int64 {
	if first, ok := ix.firstRunBase(tp); ok {
		return first
	}
	_, next, _ := ix.Positions(tp)
	return next
}

// Position is a fetch's offset in a partition.
type Position struct {
	Part   metadata.TierPartition
	Offset int64
}

// Behind reports, for each position, whether the index lags the commits
// there: the offset is past the index's log end but not past the log end
// in etcd (the index's watch resuming after the broker lost etcd, while a
// client read further through another broker). A fetch there must be
// answered with a retriable error, not OFFSET_OUT_OF_RANGE, which would
// send the client back to its reset offset for one broker's lag. When etcd
// does not answer (CommittedEnds bounds the wait), every position past the
// index's end counts as behind. etcd is read only when some position is
// past the index's end.
func (ix *Index) Behind(ctx context.Context, store HeadReader, positions []Position) []bool {
	behind := make([]bool, len(positions))
	var ahead []int
	var parts []metadata.TierPartition
	for i, pos := range positions {
		if _, next, _ := ix.Positions(pos.Part); pos.Offset > next {
			ahead, parts = append(ahead, i), append(parts, pos.Part)
		}
	}
	if len(ahead) == 0 {
		return behind
	}
	ends, err := CommittedEnds(ctx, store, parts)
	if err != nil {
		ix.log.Warn("diskless positions past the index: reading the log ends failed", "partitions", len(parts), "err", err)
	}
	for j, i := range ahead {
		behind[i] = err != nil || positions[i].Offset <= ends[j]
	}
	return behind
}

// runBytes is the size of the batches of the partition's runs.
func (ix *Index) runBytes(tp metadata.TierPartition) int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	p, ok := ix.parts[tp]
	if !ok {
		return 0
	}
	var n int64
	for _, r := range p.runs {
		n += r.run.bytes()
	}
	return n
}

// dropRuns forgets runs the merge deleted, before the watch reports it.
func (ix *Index) dropRuns(tp metadata.TierPartition, bases []int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p, ok := ix.parts[tp]
	if !ok {
		return
	}
	gone := map[int64]bool{}
	for _, b := range bases {
		gone[b] = true
	}
	kept := p.runs[:0]
	for _, r := range p.runs {
		if !gone[r.base] {
			kept = append(kept, r)
		}
	}
	p.runs = kept
}

// Loaded reports whether the index holds a full snapshot.
func (ix *Index) Loaded() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.loaded
}

// Objects returns the ids of every object a run references.
func (ix *Index) Objects() map[string]bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := map[string]bool{}
	for _, p := range ix.parts {
		for _, r := range p.runs {
			out[r.run.Object] = true
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
