package compaction

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

func TestBuildMapKeysAndSkips(t *testing.T) {
	log := concat(
		buildBatch(t, testBatch{base: 0, records: keyed("a", "1", "b", "2")}),
		buildBatch(t, testBatch{base: 2, records: []testRecord{{delta: 0, value: []byte("keyless")}}}),
		buildBatch(t, testBatch{base: 3, txn: true, producerID: 7, records: keyed("a", "aborted")}),
		buildBatch(t, testBatch{base: 4, control: true, producerID: 7}),
		buildBatch(t, testBatch{base: 5, codec: recordbatch.CodecZstd, records: keyed("b", "3", "c", "4")}),
	)
	aborted := []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: 3, LastOffset: 4}}
	m := NewOffsetMap(1 << 16)
	end, err := BuildMap(m, NewSliceSource(log), 0, 100, aborted, 1<<20)
	if err != nil || end != 100 {
		t.Fatalf("end %d, err %v", end, err)
	}
	for key, want := range map[string]int64{"a": 0, "b": 5, "c": 6} {
		if got, ok := m.Latest([]byte(key)); !ok || got != want {
			t.Fatalf("%s: %d %v, want %d", key, got, ok, want)
		}
	}
	if m.Len() != 3 {
		t.Fatalf("Len %d: control, keyless or aborted data entered the map", m.Len())
	}
}

func TestBuildMapRange(t *testing.T) {
	log := concat(
		buildBatch(t, testBatch{base: 0, records: keyed("a", "1")}),
		buildBatch(t, testBatch{base: 1, records: keyed("b", "1")}),
		buildBatch(t, testBatch{base: 2, records: keyed("c", "1")}),
	)
	m := NewOffsetMap(1 << 16)
	end, err := BuildMap(m, NewSliceSource(log), 1, 2, nil, 1<<20)
	if err != nil || end != 2 {
		t.Fatalf("end %d, err %v", end, err)
	}
	if _, ok := m.Latest([]byte("b")); !ok || m.Len() != 1 {
		t.Fatalf("want only b, Len %d", m.Len())
	}
}

func TestBuildMapStopsAtBatchWhenFull(t *testing.T) {
	log := concat(
		buildBatch(t, testBatch{base: 0, records: keyed("a", "1", "b", "1", "c", "1")}),
		buildBatch(t, testBatch{base: 3, records: keyed("d", "1", "e", "1", "f", "1")}),
		buildBatch(t, testBatch{base: 6, records: keyed("g", "1", "h", "1", "i", "1")}),
	)
	m := NewOffsetMap(8 * SlotBytes) // capacity 7: two batches
	end, err := BuildMap(m, NewSliceSource(log), 0, 100, nil, 1<<20)
	if err != nil || end != 6 {
		t.Fatalf("end %d, err %v; want 6", end, err)
	}
	if m.Len() != 6 {
		t.Fatalf("Len %d, want 6", m.Len())
	}
	if _, ok := m.Latest([]byte("g")); ok {
		t.Fatal("key past the map end recorded")
	}
	// The next pass continues from the map end.
	m.Reset()
	end, err = BuildMap(m, NewSliceSource(log), 6, 100, nil, 1<<20)
	if err != nil || end != 100 || m.Len() != 3 {
		t.Fatalf("second pass: end %d, len %d, err %v", end, m.Len(), err)
	}
	tiny := NewOffsetMap(3 * SlotBytes) // capacity 2
	if _, err := BuildMap(tiny, NewSliceSource(log), 0, 100, nil, 1<<20); !errors.Is(err, ErrMapTooSmall) {
		t.Fatalf("tiny map: %v, want ErrMapTooSmall", err)
	}
}

func TestBuildMapRejectsCorruption(t *testing.T) {
	good := buildBatch(t, testBatch{base: 0, records: keyed("a", "1")})
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 1
	outOfOrder := concat(good, buildBatch(t, testBatch{base: 0, records: keyed("b", "1")}))
	badDelta := buildBatch(t, testBatch{base: 0, lastDelta: 0, records: []testRecord{{delta: 0, key: []byte("a")}, {delta: 0, key: []byte("b")}}})
	// Two records in a one-offset batch: record count > lastOffsetDelta+1.
	for name, log := range map[string][]byte{"crc": flipped, "order": outOfOrder, "count": badDelta} {
		_, err := BuildMap(NewOffsetMap(1<<16), NewSliceSource(log), 0, 100, nil, 1<<20)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
