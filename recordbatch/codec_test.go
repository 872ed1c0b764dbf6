package recordbatch

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCodecHelpers checks the encoder and codecs against independent
// decoders: kmsg for the header, crc32 for the CRC, DecodeRecords (fresh
// readers) for CompressRecords' output and the reusing Decompressor.
func TestCodecHelpers(t *testing.T) {
	var dec Decompressor
	defer dec.Close()
	for round := range 2 { // the second round reuses every decoder
		for codec := range 5 {
			raw := (&kmsg.Record{Length: 12, Key: []byte("k"), Value: []byte("value")}).AppendTo(nil)
			payload, err := CompressRecords(codec, raw)
			if err != nil {
				t.Fatal(err)
			}
			h := Header{BaseOffset: 40, PartitionLeaderEpoch: 2, Attributes: int16(codec) | 0x10, LastOffsetDelta: 3,
				FirstTimestamp: 5, MaxTimestamp: 9, ProducerID: 8, ProducerEpoch: 1, BaseSequence: 11}
			batch := Encode([]byte("prefix"), h, 1, payload)[len("prefix"):]
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(batch); err != nil {
				t.Fatal(err)
			}
			crc := Checksum(batch[21:])
			if uint32(kb.CRC) != crc || kb.FirstOffset != 40 || kb.NumRecords != 1 || kb.Magic != 2 ||
				int(kb.Length) != len(batch)-12 || kb.FirstSequence != 11 || kb.LastOffsetDelta != 3 {
				t.Fatalf("codec %d: header %+v", codec, kb)
			}
			fresh, err := DecodeRecords(batch, 1<<10)
			if err != nil || len(fresh) != 1 || string(fresh[0].Value) != "value" {
				t.Fatalf("codec %d round %d: %v %+v", codec, round, err, fresh)
			}
			reused, err := dec.DecodeRecords(batch, 1<<10)
			if err != nil || !reflect.DeepEqual(fresh, reused) {
				t.Fatalf("codec %d round %d: Decompressor %v %+v", codec, round, err, reused)
			}
			if _, err := dec.DecodeRecords(batch, 5); !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("codec %d: limit 5: %v", codec, err)
			}
		}
	}
}
