package recordbatch

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Encode appends to dst a RecordBatch v2 with header h and the given
// record section (already compressed with h's codec), holding recordCount
// records. Every header field of h is kept except BatchLength, CRC and
// RecordCount, which are computed; Magic is always 2.
func Encode(dst []byte, h Header, recordCount int32, records []byte) []byte {
	b := kmsg.RecordBatch{
		FirstOffset:          h.BaseOffset,
		Length:               int32(MinLength + len(records)),
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           h.Attributes,
		LastOffsetDelta:      h.LastOffsetDelta,
		FirstTimestamp:       h.FirstTimestamp,
		MaxTimestamp:         h.MaxTimestamp,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		FirstSequence:        h.BaseSequence,
		NumRecords:           recordCount,
		Records:              records,
	}
	start := len(dst)
	dst = b.AppendTo(dst)
	out := dst[start:]
	binary.BigEndian.PutUint32(out[PosCRC:], Checksum(out[PosAttributes:]))
	return dst
}

// AppendRecord appends r to dst as one record of a records section, its
// length prefix computed from the encoding (r.Length is ignored).
func AppendRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)[1:] // drop the zero length: a one-byte varint
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}
