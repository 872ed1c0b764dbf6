// Package bufpool recycles large byte buffers by power-of-two capacity: the
// response frames the broker writes and the segment reads hotlog serves,
// which are megabytes each on a busy fetch path.
//
// Why: allocating a fresh multi-megabyte buffer per request means zeroing
// it (memclr was a fifth of the broker's CPU in a hot consume) and, once
// the garbage collector has returned the memory to the kernel, faulting its
// pages in again. On the 2-core benchmark machine a broker serving a hot
// consume used 2.2x less CPU per byte once its response frames were
// reused (test/bench/run.sh, consume-1k-hot-raw, broker_cpu_s).
//
// Classes: capacities 64 KiB << k for k = 0..11 (64 KiB to 128 MiB). Get(n)
// for n below 64 KiB or above 128 MiB allocates exactly n (small buffers
// are cheap; huge ones rare) and Put ignores any buffer whose capacity is
// not exactly a class size, so a buffer that grew past its class by append
// is simply left to the garbage collector.
//
// Ownership: whoever called Get owns the buffer until it calls Put; after
// Put nothing may read or write it, through any slice of it. The pools are
// sync.Pools, so idle buffers are dropped by the garbage collector within
// two cycles: the pool never pins memory a quiet broker does not use. A
// Set holds the buffers of one request's reads until they all go back.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	// MinPooled is the smallest pooled capacity.
	MinPooled = 64 << 10
	// MaxPooled is the largest pooled capacity.
	MaxPooled = 128 << 20
	classes   = 12 // MinPooled << 0..11
)

var pools [classes]sync.Pool

// class is the class whose buffers hold n bytes; false if n is not pooled.
func class(n int) (int, bool) {
	if n < MinPooled || n > MaxPooled {
		return 0, false
	}
	return bits.Len(uint((n - 1) / MinPooled)), true
}

// Get returns a buffer of length 0 and capacity at least n (exactly n when
// n is outside the pooled range). Its contents are not zeroed.
func Get(n int) []byte {
	c, ok := class(n)
	if !ok {
		return make([]byte, 0, max(n, 0))
	}
	if b, _ := pools[c].Get().(*[]byte); b != nil {
		return (*b)[:0]
	}
	return make([]byte, 0, MinPooled<<c)
}

// Put returns b's buffer to its pool if its capacity is a class size.
func Put(b []byte) {
	c, ok := class(cap(b))
	if !ok || cap(b) != MinPooled<<c {
		return
	}
	b = b[:0]
	pools[c].Put(&b)
}
