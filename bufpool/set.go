package bufpool

import "sync"

// Set collects the pooled buffers one request's reads returned, so they
// go back to the pools together once nothing reads them any more (for a
// fetch: after its response is encoded into the frame, a copy). Add may
// run from several goroutines, also after Release: a read that finishes
// after its request was answered cannot be in the answer, so its buffer
// goes back at once. A nil *Set adds nothing: reads into it are simply not
// pooled.
type Set struct {
	mu       sync.Mutex
	bufs     [][]byte
	released bool
}

// Add hands b to the set (nil b is ignored); after Release it Puts b.
func (s *Set) Add(b []byte) {
	if s == nil || b == nil {
		return
	}
	s.mu.Lock()
	released := s.released
	if !released {
		s.bufs = append(s.bufs, b)
	}
	s.mu.Unlock()
	if released {
		Put(b)
	}
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

// Release Puts every buffer added so far, and every one added later;
// nothing may read them after.
func (s *Set) Release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	bufs := s.bufs
	s.bufs = nil
	s.released = true
	s.mu.Unlock()
	for _, b := range bufs {
		Put(b)
	}
}
