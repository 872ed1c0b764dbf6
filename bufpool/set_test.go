package bufpool

import (
	"sync"
	"testing"
)

func TestSetCollectsFromManyReadersAndReleasesOnce(t *testing.T) {
	var s Set
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 16 {
				s.Add(Get(MinPooled))
			}
			s.Add(nil)
		})
	}
	wg.Wait()
	if n := s.Len(); n != 8*16 {
		t.Fatalf("set holds %d buffers, want %d", n, 8*16)
	}
	s.Release()
	if n := s.Len(); n != 0 {
		t.Fatalf("set holds %d buffers after Release", n)
	}
	s.Release() // nothing left to put twice
}

func TestNilSetPoolsNothing(t *testing.T) {
	var s *Set
	s.Add(Get(MinPooled))
	s.Release()
	if s.Len() != 0 {
		t.Fatal("a nil set holds buffers")
	}
}

// TestSetAddAfterReleaseGoesBack: a read that finishes after its request
// was answered hands its buffer to a released set, which must not keep it
// (nothing would ever Put it).
func TestSetAddAfterReleaseGoesBack(t *testing.T) {
	var s Set
	s.Add(Get(MinPooled))
	s.Release()
	s.Add(Get(MinPooled))
	if n := s.Len(); n != 0 {
		t.Fatalf("released set holds %d buffers", n)
	}
}
