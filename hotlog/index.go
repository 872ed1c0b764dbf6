package hotlog

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"
)

// Index entry sizes. Part of the on-disk format; never change.
const (
	offsetIndexEntrySize = 8  // relativeOffset u32, position u32
	timeIndexEntrySize   = 12 // timestamp i64, relativeOffset u32
	// maxIndexFileBytes bounds an index file read at Open (a 4 GiB segment
	// indexed every byte-sized batch cannot need more).
	maxIndexFileBytes = 512 << 20
)

type offsetIndexEntry struct {
	rel uint32 // batch base offset - segment base
	pos uint32 // byte position of the batch in the .log
}

type timeIndexEntry struct {
	ts  int64  // largest maxTimestamp so far in the segment
	rel uint32 // relative base offset of the first batch that reached ts
}

func appendOffsetEntry(b []byte, e offsetIndexEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, e.rel)
	return binary.BigEndian.AppendUint32(b, e.pos)
}

func appendTimeEntry(b []byte, e timeIndexEntry) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
	return binary.BigEndian.AppendUint32(b, e.rel)
}

// lookupOffset returns the position of a batch at or before the batch that
// holds offset. REQUIRES: offset >= base.
func lookupOffset(entries []offsetIndexEntry, base, offset int64) int64 {
	rel := offset - base
	if rel > math.MaxUint32 {
		rel = math.MaxUint32
	}
	i := sort.Search(len(entries), func(i int) bool { return int64(entries[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(entries[i-1].pos)
}

// lookupTime returns an offset such that every record of the segment below
// it has a timestamp < ts.
func lookupTime(entries []timeIndexEntry, base, ts int64) int64 {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].ts > ts })
	if i == 0 {
		return base
	}
	return base + int64(entries[i-1].rel)
}

// loadOffsetIndex reads and sanity-checks a sealed segment's .index file:
// whole entries, strictly increasing, positions inside logSize.
func loadOffsetIndex(path string, logSize int64) ([]offsetIndexEntry, error) {
	data, err := readIndexFile(path, offsetIndexEntrySize)
	if err != nil {
		return nil, err
	}
	entries := make([]offsetIndexEntry, 0, len(data)/offsetIndexEntrySize)
	for i := 0; i < len(data); i += offsetIndexEntrySize {
		e := offsetIndexEntry{rel: binary.BigEndian.Uint32(data[i:]), pos: binary.BigEndian.Uint32(data[i+4:])}
		if n := len(entries); n > 0 && (e.rel <= entries[n-1].rel || e.pos <= entries[n-1].pos) {
			return nil, fmt.Errorf("hotlog: %s: entry %d not increasing", path, n)
		}
		if int64(e.pos) >= logSize {
			return nil, fmt.Errorf("hotlog: %s: position %d past log end %d", path, e.pos, logSize)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// loadTimeIndex reads and sanity-checks a sealed segment's .timeindex file.
// maxRel bounds relative offsets (the last index entry's).
func loadTimeIndex(path string, maxRel uint32) ([]timeIndexEntry, error) {
	data, err := readIndexFile(path, timeIndexEntrySize)
	if err != nil {
		return nil, err
	}
	entries := make([]timeIndexEntry, 0, len(data)/timeIndexEntrySize)
	for i := 0; i < len(data); i += timeIndexEntrySize {
		e := timeIndexEntry{ts: int64(binary.BigEndian.Uint64(data[i:])), rel: binary.BigEndian.Uint32(data[i+8:])}
		if n := len(entries); n > 0 && (e.ts <= entries[n-1].ts || e.rel <= entries[n-1].rel) {
			return nil, fmt.Errorf("hotlog: %s: entry %d not increasing", path, n)
		}
		if e.rel > maxRel {
			return nil, fmt.Errorf("hotlog: %s: offset %d past the offset index", path, e.rel)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func readIndexFile(path string, entrySize int) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxIndexFileBytes || st.Size()%int64(entrySize) != 0 {
		return nil, fmt.Errorf("hotlog: %s: bad size %d", path, st.Size())
	}
	return os.ReadFile(path)
}

func encodeOffsetIndex(entries []offsetIndexEntry) []byte {
	b := make([]byte, 0, len(entries)*offsetIndexEntrySize)
	for _, e := range entries {
		b = appendOffsetEntry(b, e)
	}
	return b
}

func encodeTimeIndex(entries []timeIndexEntry) []byte {
	b := make([]byte, 0, len(entries)*timeIndexEntrySize)
	for _, e := range entries {
		b = appendTimeEntry(b, e)
	}
	return b
}
