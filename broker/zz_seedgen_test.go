package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFuzzSeedsTmp(t *testing.T) {
	dir := "testdata/fuzz/FuzzProduceRecords"
	os.MkdirAll(dir, 0o755)
	good := buildBatch(batchSpec{records: 3, valueSize: 16, producerID: 9, timestamp: 1700000000000})
	small := buildBatch(batchSpec{records: 1, valueSize: 0, timestamp: 5})
	seeds := []struct {
		name string
		b    []byte
		lat  bool
		max  int32
	}{
		{"good", good, false, 1048588},
		{"two-batches", concat(good, small), false, 1048588},
		{"log-append-time", concat(good, small), true, 1048588},
		{"bad-crc", withByte(good, len(good)-1, good[len(good)-1]^0xff), false, 1048588},
		{"magic-1", withByte(good, 16, 1), false, 1048588},
		{"magic-0", withByte(good, 16, 0), false, 1048588},
		{"truncated", good[:len(good)-3], false, 1048588},
		{"header-only", good[:61], false, 1048588},
		{"trailing-garbage", concat(small, []byte{1, 2, 3, 4}), false, 1048588},
		{"too-large", good, false, int32(len(good) - 1)},
		{"negative-length", withByte(good, 8, 0x80), false, 1048588},
		{"control", buildBatch(batchSpec{records: 1, attributes: 0x20}), false, 1048588},
		{"transactional", buildBatch(batchSpec{records: 1, attributes: 0x10, producerID: 3}), false, 1048588},
		{"zstd", buildBatch(batchSpec{records: 2, attributes: 4}), false, 1048588},
		{"empty", []byte{}, false, 1048588},
	}
	for _, s := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\nint32(%d)\n", s.b, s.lat, s.max)
		if err := os.WriteFile(filepath.Join(dir, s.name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
