package compaction

import (
	"fmt"
	"testing"
)

func TestOffsetMapPutLatest(t *testing.T) {
	m := NewOffsetMap(100 * SlotBytes)
	if m.Capacity() != 90 {
		t.Fatalf("capacity %d, want 90 (90%% of 100 slots)", m.Capacity())
	}
	if _, ok := m.Latest([]byte("a")); ok {
		t.Fatal("empty map found a key")
	}
	for _, p := range []struct {
		key    string
		offset int64
	}{{"a", 1}, {"b", 2}, {"a", 7}, {"a", 3}, {"", 4}} {
		if !m.Put([]byte(p.key), p.offset) {
			t.Fatalf("Put(%q, %d) refused", p.key, p.offset)
		}
	}
	for key, want := range map[string]int64{"a": 7, "b": 2, "": 4} {
		if got, ok := m.Latest([]byte(key)); !ok || got != want {
			t.Fatalf("Latest(%q) = %d, %v; want %d", key, got, ok, want)
		}
	}
	if m.Len() != 3 {
		t.Fatalf("Len %d, want 3", m.Len())
	}
	if m.Put([]byte("c"), -1) {
		t.Fatal("negative offset accepted")
	}
	m.Reset()
	if _, ok := m.Latest([]byte("a")); ok || m.Len() != 0 {
		t.Fatal("Reset left keys")
	}
}

func TestOffsetMapFull(t *testing.T) {
	m := NewOffsetMap(10 * SlotBytes) // 9 keys
	for i := range 9 {
		if !m.Put(fmt.Appendf(nil, "k%d", i), int64(i)) {
			t.Fatalf("key %d refused below capacity", i)
		}
	}
	if m.Put([]byte("new"), 100) {
		t.Fatal("full map took a new key")
	}
	if _, ok := m.Latest([]byte("new")); ok {
		t.Fatal("refused key recorded")
	}
	if !m.Put([]byte("k3"), 50) {
		t.Fatal("full map refused an update of a present key")
	}
	if got, _ := m.Latest([]byte("k3")); got != 50 {
		t.Fatalf("k3 latest %d, want 50", got)
	}
	for _, budget := range []int64{0, SlotBytes - 1, -5} {
		z := NewOffsetMap(budget)
		if z.Put([]byte("x"), 1) || z.Capacity() != 0 {
			t.Fatalf("budget %d: map took a key", budget)
		}
		if _, ok := z.Latest([]byte("x")); ok {
			t.Fatalf("budget %d: found a key", budget)
		}
	}
}

// TestOffsetMapManyKeys fills a map to capacity and checks that every key
// maps to its own offset and that absent keys are absent (no false matches).
func TestOffsetMapManyKeys(t *testing.T) {
	m := NewOffsetMap(200_000 * SlotBytes)
	n := m.Capacity()
	for i := range n {
		if !m.Put(fmt.Appendf(nil, "key-%d", i), int64(i)) {
			t.Fatalf("key %d refused", i)
		}
	}
	for i := range n {
		if got, ok := m.Latest(fmt.Appendf(nil, "key-%d", i)); !ok || got != int64(i) {
			t.Fatalf("key %d: %d, %v", i, got, ok)
		}
	}
	for i := range 100_000 {
		if _, ok := m.Latest(fmt.Appendf(nil, "absent-%d", i)); ok {
			t.Fatalf("absent key %d found", i)
		}
	}
}
