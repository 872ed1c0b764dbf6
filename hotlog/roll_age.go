package hotlog

import "time"

// RollIfOlder seals the active segment when its first batch was appended
// at least age ago and some of it lies below stableEnd (the caller's
// committed and stable end: the high watermark, or the last stable offset
// if lower). The sealed segment can then be uploaded as soon as the high
// watermark passes its end, so no committed record waits for segment.bytes
// or segment.ms to leave the local disk. An empty active segment, or one
// holding only records at or above stableEnd, never rolls: a quiet
// partition costs nothing. It reports whether it rolled.
func (l *Log) RollIfOlder(now time.Time, age time.Duration, stableEnd int64) (bool, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err := l.usableLocked()
	active := l.activeLocked()
	due := active.size > 0 && active.base < stableEnd && now.UnixMilli()-active.rollBaseMs >= age.Milliseconds()
	l.mu.RUnlock()
	if err != nil || !due {
		return false, err
	}
	return true, l.roll()
}

// FirstAppendAt dates the record at offset from below, in Unix
// milliseconds: the arrival of the newest sampled batch at or below it
// (arrivals.go), else the first append of its segment (the wall clock, or
// for a segment reloaded from disk its first batch's max timestamp). The
// record was appended at or after it, so now minus it bounds the record's
// age from above, within a second for the active and newest sealed
// segments. ok is false when the log does not hold offset.
func (l *Log) FirstAppendAt(offset int64) (ms int64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed || len(l.mu.segments) == 0 || offset < l.mu.segments[0].base || offset >= l.leoLocked() {
		return 0, false
	}
	s := l.mu.segments[l.segmentForLocked(offset)]
	if ms, ok := s.arrivals.before(offset); ok {
		return ms, true
	}
	return s.rollBaseMs, s.rollBaseMs >= 0
}
