package bufpool

import "sync"

// Set collects the pooled buffers one request's reads returned, so they
// go back to the pools together once nothing reads them any more (for a
// fetch: after its response is encoded into the frame, a copy). Add may
// run from several goroutines; Release runs once, after the last reader.
// A nil *Set adds nothing: reads into it are simply not pooled.
type Set struct {
	mu   sync.Mutex
	bufs [][]byte
}

// Add hands b to the set (nil b is ignored).
func (s *Set) Add(b []byte) {
	if s == nil || b == nil {
		return
	}
	s.mu.Lock()
	s.bufs = append(s.bufs, b)
	s.mu.Unlock()
}

// Len is how many buffers the set holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bufs)
}

// Release Puts every buffer added so far; nothing may read them after.
func (s *Set) Release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	bufs := s.bufs
	s.bufs = nil
	s.mu.Unlock()
	for _, b := range bufs {
		Put(b)
	}
}
