package tier

import (
	"math/bits"

	"golang.org/x/sys/unix"
)

// minSlot is the smallest arena slot: smaller blocks (the tail of a small
// object) share its size class.
const minSlot = 64 << 10

// blockArena is the memory of the cold cache's blocks: anonymous mappings
// outside the Go heap, reused through free lists by power-of-two size
// class.
//
// Why off-heap: cached blocks are long-lived, and a Go heap holding
// CacheBytes of them would let the garbage collector grow the heap to
// about twice that before collecting (GOGC=100 sets the next collection at
// twice the live heap), so a 256 MiB cache cost over 600 MiB of RSS. Here
// the budget bounds every byte of block memory: cached blocks, blocks in
// flight and evicted blocks still referenced. A slot is mapped the first
// time its class needs one and the budget allows it, then reused (no
// zeroing, no page faults); free slots of other classes are unmapped to
// make room for a new class.
//
// Not safe for concurrent use: its owner (ColdReader) holds its lock.
type blockArena struct {
	budget int64            // bytes the arena may map
	mapped int64            // bytes mapped now
	free   map[int][][]byte // free slots by capacity, each a whole mapping
	closed bool             // released slots are unmapped, not kept
}

func newBlockArena(budget int64) *blockArena {
	return &blockArena{budget: budget, free: map[int][][]byte{}}
}

// slotSize is the capacity of the slot that holds n bytes.
func slotSize(n int64) int {
	if n <= minSlot {
		return minSlot
	}
	return 1 << bits.Len64(uint64(n-1))
}

// get returns a slot of at least n bytes, sliced to n, or false when the
// budget is spent on slots in use (the caller evicts and tries again).
func (a *blockArena) get(n int64) ([]byte, bool) {
	size := slotSize(n)
	if a.closed || int64(size) > a.budget {
		return nil, false
	}
	if l := a.free[size]; len(l) > 0 {
		slot := l[len(l)-1]
		a.free[size] = l[:len(l)-1]
		return slot[:n], true
	}
	for a.mapped+int64(size) > a.budget && a.unmapOtherFree(size) {
	}
	if a.mapped+int64(size) > a.budget {
		return nil, false
	}
	slot, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, false // out of address space or memory: the caller uses the heap
	}
	a.mapped += int64(size)
	return slot[:n], true
}

// unmapOtherFree unmaps one free slot of a class other than size; false
// when there is none.
func (a *blockArena) unmapOtherFree(size int) bool {
	for class, l := range a.free {
		if class == size || len(l) == 0 {
			continue
		}
		a.unmap(l[len(l)-1])
		a.free[class] = l[:len(l)-1]
		return true
	}
	return false
}

// put returns a slot from get. The caller must hold no view of it.
func (a *blockArena) put(b []byte) {
	slot := b[:cap(b)]
	if a.closed {
		a.unmap(slot)
		return
	}
	a.free[cap(slot)] = append(a.free[cap(slot)], slot)
}

// close unmaps the free slots; slots still in use are unmapped by put.
func (a *blockArena) close() {
	a.closed = true
	for class, l := range a.free {
		for _, slot := range l {
			a.unmap(slot)
		}
		delete(a.free, class)
	}
}

func (a *blockArena) unmap(slot []byte) {
	if err := unix.Munmap(slot); err == nil {
		a.mapped -= int64(len(slot))
	}
}
