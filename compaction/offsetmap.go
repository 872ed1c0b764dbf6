package compaction

import (
	"hash/maphash"
	"math/bits"
)

// SlotBytes is the memory one OffsetMap slot takes: a 128-bit key hash and an
// offset.
const SlotBytes = 24

// maxLoadPercent caps how full the table gets, keeping linear probes short
// and guaranteeing every probe meets an empty slot.
const maxLoadPercent = 90

// slot is one table entry. offsetPlusOne == 0 marks an empty slot, so a
// zeroed table is empty.
type slot struct {
	hashHigh, hashLow uint64
	offsetPlusOne     int64
}

// OffsetMap maps record keys to the latest offset seen for them, in a fixed
// amount of memory (see doc.go). Not safe for concurrent use.
type OffsetMap struct {
	seedHigh, seedLow maphash.Seed
	slots             []slot
	capacity          int // most keys the map takes: maxLoadPercent of the slots
	entries           int
}

// NewOffsetMap returns a map using at most budgetBytes for its table
// (budgetBytes/SlotBytes slots, of which 90% may be filled). A budget below
// one slot gives a map that takes no keys.
func NewOffsetMap(budgetBytes int64) *OffsetMap {
	n := max(budgetBytes/SlotBytes, 0)
	return &OffsetMap{
		seedHigh: maphash.MakeSeed(),
		seedLow:  maphash.MakeSeed(),
		slots:    make([]slot, n),
		capacity: int(n/100*maxLoadPercent + n%100*maxLoadPercent/100), // no overflow
	}
}

// Capacity is the most distinct keys the map holds.
func (m *OffsetMap) Capacity() int { return m.capacity }

// Len is the number of distinct keys (key hashes) in the map.
func (m *OffsetMap) Len() int { return m.entries }

// Reset empties the map, keeping its memory.
func (m *OffsetMap) Reset() {
	clear(m.slots)
	m.entries = 0
}

// Put records offset as key's latest offset (the larger one wins if key is
// already there). It returns false, recording nothing, when key is new and the
// map is full, or offset is negative.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	if offset < 0 {
		return false
	}
	i, found := m.find(key)
	if found {
		m.slots[i].offsetPlusOne = max(m.slots[i].offsetPlusOne, offset+1)
		return true
	}
	if m.entries >= m.capacity {
		return false
	}
	high, low := m.hash(key)
	m.slots[i] = slot{hashHigh: high, hashLow: low, offsetPlusOne: offset + 1}
	m.entries++
	return true
}

// Latest returns the latest offset recorded for key.
func (m *OffsetMap) Latest(key []byte) (int64, bool) {
	i, found := m.find(key)
	if !found {
		return 0, false
	}
	return m.slots[i].offsetPlusOne - 1, true
}

// find returns the slot holding key, or the empty slot where it would go
// (found false). With no slots it returns (0, false); callers check capacity
// (0 then) before writing.
func (m *OffsetMap) find(key []byte) (int, bool) {
	n := uint64(len(m.slots))
	if n == 0 {
		return 0, false
	}
	high, low := m.hash(key)
	// Map the hash onto [0, n) without a modulo bias worth caring about.
	i, _ := bits.Mul64(high, n)
	for {
		s := &m.slots[i]
		if s.offsetPlusOne == 0 {
			return int(i), false
		}
		if s.hashHigh == high && s.hashLow == low {
			return int(i), true
		}
		// Terminates: at most maxLoadPercent of the slots are full.
		if i++; i == n {
			i = 0
		}
	}
}

// hash returns the key's two independent 64-bit hashes.
func (m *OffsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seedHigh, key), maphash.Bytes(m.seedLow, key)
}
