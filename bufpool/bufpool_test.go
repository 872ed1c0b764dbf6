package bufpool

import "testing"

func TestGetCapacities(t *testing.T) {
	for _, c := range []struct{ n, wantCap int }{
		{0, 0}, {1, 1}, {MinPooled - 1, MinPooled - 1}, // not pooled: exactly n
		{MinPooled, MinPooled}, {MinPooled + 1, 2 * MinPooled}, {2 * MinPooled, 2 * MinPooled},
		{5 << 20, 8 << 20}, {MaxPooled, MaxPooled},
		{MaxPooled + 1, MaxPooled + 1}, // not pooled
	} {
		b := Get(c.n)
		if len(b) != 0 || cap(b) != c.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want 0 and %d", c.n, len(b), cap(b), c.wantCap)
		}
		Put(append(b, 1, 2, 3))
	}
}

func TestReusedBufferComesBackEmpty(t *testing.T) {
	for range 3 {
		b := Get(1 << 20)
		if len(b) != 0 || cap(b) != 1<<20 {
			t.Fatalf("len %d cap %d", len(b), cap(b))
		}
		Put(append(b, make([]byte, 1000)...))
	}
}

func TestPutIgnoresOddCapacities(t *testing.T) {
	odd := make([]byte, 0, MinPooled+5)
	Put(odd) // not a class size: dropped
	for range 10 {
		if b := Get(MinPooled + 5); cap(b) != 2*MinPooled {
			t.Fatalf("Get returned a buffer of capacity %d, want the class size %d", cap(b), 2*MinPooled)
		}
	}
}
