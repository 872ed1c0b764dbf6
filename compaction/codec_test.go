package compaction

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCodecHelpers checks hotlog's batch_codec helpers against independent
// decoders: kmsg for the header, crc32 for the CRC, hotlog.DecodeRecords
// (fresh readers) for CompressRecords' output and the reusing Decompressor.
func TestCodecHelpers(t *testing.T) {
	var dec hotlog.Decompressor
	defer dec.Close()
	for round := range 2 { // the second round reuses every decoder
		for codec := range 5 {
			raw := (&kmsg.Record{Length: 12, Key: []byte("k"), Value: []byte("value")}).AppendTo(nil)
			payload, err := hotlog.CompressRecords(codec, raw)
			if err != nil {
				t.Fatal(err)
			}
			h := hotlog.BatchHeader{BaseOffset: 40, PartitionLeaderEpoch: 2, Attributes: int16(codec) | 0x10, LastOffsetDelta: 3,
				FirstTimestamp: 5, MaxTimestamp: 9, ProducerID: 8, ProducerEpoch: 1, BaseSequence: 11}
			batch := hotlog.EncodeBatch([]byte("prefix"), h, 1, payload)[len("prefix"):]
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(batch); err != nil {
				t.Fatal(err)
			}
			crc := crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli))
			if uint32(kb.CRC) != crc || kb.FirstOffset != 40 || kb.NumRecords != 1 || kb.Magic != 2 ||
				int(kb.Length) != len(batch)-12 || kb.FirstSequence != 11 || kb.LastOffsetDelta != 3 {
				t.Fatalf("codec %d: header %+v", codec, kb)
			}
			fresh, err := hotlog.DecodeRecords(batch, 1<<10)
			if err != nil || len(fresh) != 1 || string(fresh[0].Value) != "value" {
				t.Fatalf("codec %d round %d: %v %+v", codec, round, err, fresh)
			}
			reused, err := dec.DecodeRecords(batch, 1<<10)
			if err != nil || !reflect.DeepEqual(fresh, reused) {
				t.Fatalf("codec %d round %d: Decompressor %v %+v", codec, round, err, reused)
			}
			if _, err := dec.DecodeRecords(batch, 5); !errors.Is(err, hotlog.ErrDecompressedTooLarge) {
				t.Fatalf("codec %d: limit 5: %v", codec, err)
			}
		}
	}
}

// FuzzDecompressor checks the reusing Decompressor agrees with
// hotlog.DecodeRecords on arbitrary batches.
func FuzzDecompressor(f *testing.F) {
	for _, s := range fuzzSeedLogs(f) {
		f.Add(s, uint16(1000))
	}
	var dec hotlog.Decompressor
	f.Fuzz(func(t *testing.T, b []byte, limit uint16) {
		if len(b) > 12 {
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // one batch filling b
		}
		want, wantErr := hotlog.DecodeRecords(b, int(limit))
		got, gotErr := dec.DecodeRecords(b, int(limit))
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) && (wantErr == nil || gotErr == nil ||
			errors.Is(wantErr, hotlog.ErrDecompressedTooLarge) != errors.Is(gotErr, hotlog.ErrDecompressedTooLarge)) {
			t.Fatalf("errors differ: %v vs %v", wantErr, gotErr)
		}
		if wantErr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("records differ")
		}
	})
}
