package follower

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// batchSpec describes a hand-built RecordBatch v2.
type batchSpec struct {
	records   int
	valueSize int
	timestamp int64
}

// buildBatch encodes spec with kmsg and a correct length and CRC, as a
// producer would send it.
func buildBatch(spec batchSpec) []byte {
	var records []byte
	for i := range spec.records {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: make([]byte, spec.valueSize)}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // placeholder length byte was 0: one varint byte
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(spec.records - 1),
		FirstTimestamp:       spec.timestamp,
		MaxTimestamp:         spec.timestamp + int64(max(spec.records-1, 0)),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(spec.records),
		Records:              records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], recordbatch.Checksum(b[21:]))
	return b
}

func concatBatches(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// withByteAt returns a copy of b with b[i] = v (no CRC fix-up).
func withByteAt(b []byte, i int, v byte) []byte {
	c := append([]byte(nil), b...)
	c[i] = v
	return c
}
