package tier

import (
	"bytes"
	"slices"
	"sort"
	"sync"

	"github.com/strata-log/strata/metadata"
)

// Manifest is the broker's in-memory copy of the etcd tier manifest, fed by
// the metadata watch (Apply) and by snapshots (LoadSnapshot), plus the
// uploader's own commits for read-your-writes. Safe for concurrent use.
//
// Invariants per partition: entries are sorted by BaseOffset; floor only
// grows. floor is one past the last offset of the highest entry ever seen
// deleted without another entry covering its offsets (retention, DeleteRecords),
// or the tiered log start, whichever is larger: a TierPut below it is a
// stale event (the watch delivering an old commit after this broker
// already applied a later delete) and is ignored, since offsets below a
// deleted entry are never tiered again.
//
// Entries do not overlap, except while the events of one compaction swap
// (metadata.SwapTierEntriesRev) are applied one by one: etcd delivers the
// puts of the new entries before the deletes of the old ones, so for a
// moment both cover the run, and the run's offsets are never uncovered.
// Find and Range work with such overlaps; a put that overlaps an entry
// with a higher Version is stale (the old commit of an entry a swap
// already replaced) and ignored, and a delete never removes an entry
// newer than the one deleted (a later swap reused its base offset).
type Manifest struct {
	mu    sync.RWMutex
	parts map[metadata.TierPartition]*manifestPartition // guarded by mu
}

// manifestPartition is one partition's view. Guarded by Manifest.mu.
type manifestPartition struct {
	entries []metadata.TierEntry
	// maxLast[i] is the largest LastOffset of entries[:i+1]: Find's binary
	// search key, monotonic even while a swap makes entries overlap.
	maxLast  []int64
	floor    int64 // see Manifest
	logStart int64 // tiered log start from etcd (DeleteRecords, retention)
}

// NewManifest returns an empty manifest.
func NewManifest() *Manifest {
	return &Manifest{parts: map[metadata.TierPartition]*manifestPartition{}}
}

func tp(id metadata.TopicID, partition int32) metadata.TierPartition {
	return metadata.TierPartition{TopicID: id, Partition: partition}
}

// partLocked returns the partition's view, creating it. REQUIRES: mu held for writing.
func (m *Manifest) partLocked(key metadata.TierPartition) *manifestPartition {
	p := m.parts[key]
	if p == nil {
		p = &manifestPartition{}
		m.parts[key] = p
	}
	return p
}

// Apply applies one metadata event: TierPut, TierDeleted, TierLogStartPut
// and TopicDeleted change the manifest; other kinds are ignored (Resync is
// the caller's job: take a snapshot and LoadSnapshot it).
func (m *Manifest) Apply(ev metadata.Event) {
	switch ev.Kind {
	case metadata.TierPut:
		if ev.Tier != nil {
			m.put(*ev.Tier)
		}
	case metadata.TierDeleted:
		if ev.Tier != nil {
			m.remove(*ev.Tier)
		}
	case metadata.TierLogStartPut:
		m.SetLogStart(ev.TopicID, ev.Partition, ev.TierLogStart)
	case metadata.TopicDeleted:
		m.DropTopic(ev.TopicID)
	}
}

// put inserts or replaces the entry with e's base offset.
func (m *Manifest) put(e metadata.TierEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.partLocked(tp(e.TopicID, e.Partition))
	if e.LastOffset < p.floor {
		return
	}
	if p.newerOverlaps(e) {
		return // older than what we have
	}
	if i, found := p.search(e.BaseOffset); found {
		p.entries[i] = e
	} else {
		p.entries = slices.Insert(p.entries, i, e)
	}
	p.reindex()
}

// newerOverlaps reports whether an entry with a higher Version than e
// covers any of e's offsets (e is a stale event). Unknown versions (0)
// never count as newer or older.
func (p *manifestPartition) newerOverlaps(e metadata.TierEntry) bool {
	if e.Version == 0 {
		return false
	}
	for _, x := range p.entries {
		if x.BaseOffset > e.LastOffset {
			break
		}
		if x.LastOffset >= e.BaseOffset && x.Version > e.Version {
			return true
		}
	}
	return false
}

// reindex recomputes maxLast after entries changed.
func (p *manifestPartition) reindex() {
	p.maxLast = p.maxLast[:0]
	top := int64(-1)
	for _, e := range p.entries {
		top = max(top, e.LastOffset)
		p.maxLast = append(p.maxLast, top)
	}
}

// covered reports whether the remaining entries cover every offset of
// [from, to].
func (p *manifestPartition) covered(from, to int64) bool {
	next := from // first offset not yet known covered
	for _, e := range p.entries {
		if e.BaseOffset > next {
			break
		}
		next = max(next, e.LastOffset+1)
		if next > to {
			return true
		}
	}
	return false
}

// remove deletes the entry with e's base offset (unless what is there is
// newer than e) and raises the floor unless other entries still cover the
// deleted offsets (a compaction swap replaced them).
func (m *Manifest) remove(e metadata.TierEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(m.partLocked(tp(e.TopicID, e.Partition)), e)
}

// removeLocked is remove. REQUIRES: mu held for writing.
func (m *Manifest) removeLocked(p *manifestPartition, e metadata.TierEntry) {
	last := e.LastOffset
	if i, found := p.search(e.BaseOffset); found {
		if x := p.entries[i]; e.Version != 0 && x.Version > e.Version {
			return // a later swap reused the base: not the entry deleted
		}
		last = max(last, p.entries[i].LastOffset)
		p.entries = slices.Delete(p.entries, i, i+1)
		p.reindex()
	}
	if !p.covered(e.BaseOffset, last) {
		p.floor = max(p.floor, last+1)
	}
}

// search finds base among the entries (binary search).
func (p *manifestPartition) search(base int64) (int, bool) {
	return slices.BinarySearchFunc(p.entries, base, func(e metadata.TierEntry, b int64) int {
		switch {
		case e.BaseOffset < b:
			return -1
		case e.BaseOffset > b:
			return 1
		}
		return 0
	})
}

// Committed applies the uploader's own successful commit at once, so that
// local retention and cold reads see it before the watch delivers it.
func (m *Manifest) Committed(e metadata.TierEntry) { m.put(e) }

// Swapped applies this broker's own successful compaction swap at once
// (olds as passed to metadata.SwapTierEntriesRev, news with their Version
// set to its revision), in one step: readers see either the olds or the
// news. The watch's later events of the same swap change nothing.
func (m *Manifest) Swapped(olds, news []metadata.TierEntry) {
	if len(olds) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.partLocked(tp(olds[0].TopicID, olds[0].Partition))
	newBases := map[int64]bool{}
	for _, e := range news {
		newBases[e.BaseOffset] = true
		if e.LastOffset < p.floor || p.newerOverlaps(e) {
			continue
		}
		if i, found := p.search(e.BaseOffset); found {
			p.entries[i] = e
		} else {
			p.entries = slices.Insert(p.entries, i, e)
		}
	}
	p.reindex()
	for _, e := range olds {
		if !newBases[e.BaseOffset] {
			m.removeLocked(p, e)
		}
	}
}

// Removed applies this broker's own deletion of entries at once.
func (m *Manifest) Removed(entries []metadata.TierEntry) {
	for _, e := range entries {
		m.remove(e)
	}
}

// Load replaces the whole manifest's entries with entries (a fresh read of
// etcd); log starts are kept.
func (m *Manifest) Load(entries []metadata.TierEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	starts := map[metadata.TierPartition]int64{}
	for k, p := range m.parts {
		starts[k] = p.logStart
	}
	m.loadLocked(entries, starts)
}

// LoadSnapshot replaces the manifest with the snapshot's entries and log
// starts (at start, and after a watch Resync).
func (m *Manifest) LoadSnapshot(snap metadata.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loadLocked(snap.Tier, snap.TierLogStarts)
}

// loadLocked rebuilds every partition. REQUIRES: mu held for writing.
func (m *Manifest) loadLocked(entries []metadata.TierEntry, starts map[metadata.TierPartition]int64) {
	m.parts = map[metadata.TierPartition]*manifestPartition{}
	for _, e := range entries {
		p := m.partLocked(tp(e.TopicID, e.Partition))
		p.entries = append(p.entries, e)
	}
	for _, p := range m.parts {
		slices.SortFunc(p.entries, func(a, b metadata.TierEntry) int { return int(sign(a.BaseOffset - b.BaseOffset)) })
		p.reindex()
	}
	for k, start := range starts {
		p := m.partLocked(k)
		p.logStart = start
		p.floor = max(p.floor, start)
	}
}

func sign(x int64) int64 {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// SetLogStart raises the partition's tiered log start (never lowers it).
func (m *Manifest) SetLogStart(id metadata.TopicID, partition int32, start int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.partLocked(tp(id, partition))
	p.logStart = max(p.logStart, start)
}

// LogStart is the partition's tiered log start (0 if never raised): offsets
// below it are deleted even where an object still holds them.
func (m *Manifest) LogStart(id metadata.TopicID, partition int32) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if p := m.parts[tp(id, partition)]; p != nil {
		return p.logStart
	}
	return 0
}

// DropTopic forgets every partition of a deleted topic.
func (m *Manifest) DropTopic(id metadata.TopicID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.parts {
		if k.TopicID == id {
			delete(m.parts, k)
		}
	}
}

// Segments returns a copy of the partition's entries, sorted by BaseOffset.
func (m *Manifest) Segments(id metadata.TopicID, partition int32) []metadata.TierEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if p := m.parts[tp(id, partition)]; p != nil {
		return slices.Clone(p.entries)
	}
	return nil
}

// Find returns the entry containing offset, or else the first entry above
// it; false if there is none. While a swap's entries overlap, the entry
// with the lowest base offset that reaches offset is returned: an old or a
// new object, both of which hold (or compacted away) the same offsets.
func (m *Manifest) Find(id metadata.TopicID, partition int32, offset int64) (metadata.TierEntry, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.parts[tp(id, partition)]
	if p == nil {
		return metadata.TierEntry{}, false
	}
	i := sort.Search(len(p.maxLast), func(i int) bool { return p.maxLast[i] >= offset })
	if i == len(p.entries) {
		return metadata.TierEntry{}, false
	}
	return p.entries[i], true
}

// Range is the tiered offset range [first base, last LastOffset+1); ok is
// false when the partition has no entries.
func (m *Manifest) Range(id metadata.TopicID, partition int32) (start, end int64, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.parts[tp(id, partition)]
	if p == nil || len(p.entries) == 0 {
		return 0, 0, false
	}
	return p.entries[0].BaseOffset, p.maxLast[len(p.maxLast)-1] + 1, true
}

// ContiguousEnd is one past the last offset of the gap-free run of entries
// that starts at the first entry still above the tiered log start (entries
// wholly below it are deleted data, and a gap below the log start is no
// gap); ok is false when there is no such entry. Local retention may delete
// only segments below it, and the uploader resumes there.
func (m *Manifest) ContiguousEnd(id metadata.TopicID, partition int32) (end int64, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.parts[tp(id, partition)]
	if p == nil {
		return 0, false
	}
	for _, e := range p.entries {
		switch {
		case e.LastOffset < p.logStart:
			continue
		case !ok:
			end, ok = e.LastOffset+1, true
		case e.BaseOffset > max(end, p.logStart):
			return end, true
		default:
			end = max(end, e.LastOffset+1)
		}
	}
	return end, ok
}

// Keys returns the object key of every entry (the orphan sweeper keeps
// these).
func (m *Manifest) Keys() map[string]struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]struct{}{}
	for _, p := range m.parts {
		for _, e := range p.entries {
			out[e.Key] = struct{}{}
		}
	}
	return out
}

// All returns every entry of every partition (copies), by partition and
// base offset.
func (m *Manifest) All() []metadata.TierEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []metadata.TierEntry
	for _, p := range m.parts {
		out = append(out, p.entries...)
	}
	slices.SortFunc(out, func(a, b metadata.TierEntry) int {
		if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(sign(a.BaseOffset - b.BaseOffset))
	})
	return out
}
