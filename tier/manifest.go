package tier

import (
	"slices"
	"sort"
	"sync"

	"github.com/strata-log/strata/metadata"
)

// Manifest is the broker's in-memory copy of the etcd tier manifest, fed by
// the metadata watch (Apply) and by snapshots (LoadSnapshot), plus the
// uploader's own commits for read-your-writes. Safe for concurrent use.
//
// Invariants per partition: entries are sorted by BaseOffset and do not
// overlap; floor only grows. floor is one past the last offset of the
// highest entry ever seen deleted, or the tiered log start, whichever is
// larger: a TierPut below it is a stale event (the watch delivering an old
// commit after this broker already applied a later delete) and is ignored,
// since offsets below a deleted entry are never tiered again.
type Manifest struct {
	mu    sync.RWMutex
	parts map[metadata.TierPartition]*manifestPartition // guarded by mu
}

// manifestPartition is one partition's view. Guarded by Manifest.mu.
type manifestPartition struct {
	entries  []metadata.TierEntry
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
	i, found := p.search(e.BaseOffset)
	if found {
		if e.Version != 0 && p.entries[i].Version > e.Version {
			return // older than what we have
		}
		p.entries[i] = e
		return
	}
	p.entries = slices.Insert(p.entries, i, e)
}

// remove deletes the entry with e's base offset and raises the floor.
func (m *Manifest) remove(e metadata.TierEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.partLocked(tp(e.TopicID, e.Partition))
	last := e.LastOffset
	if i, found := p.search(e.BaseOffset); found {
		last = max(last, p.entries[i].LastOffset)
		p.entries = slices.Delete(p.entries, i, i+1)
	}
	p.floor = max(p.floor, last+1)
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
// it; false if there is none.
func (m *Manifest) Find(id metadata.TopicID, partition int32, offset int64) (metadata.TierEntry, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.parts[tp(id, partition)]
	if p == nil {
		return metadata.TierEntry{}, false
	}
	i := sort.Search(len(p.entries), func(i int) bool { return p.entries[i].LastOffset >= offset })
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
	return p.entries[0].BaseOffset, p.entries[len(p.entries)-1].LastOffset + 1, true
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
