package hotlog

// BatchHeader is the fixed 61-byte header of a Kafka RecordBatch (magic 2).
// See doc.go for the byte layout.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32 // CRC-32C of attributes..end
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// BatchHeaderSize is the size of the RecordBatch v2 header. Part of the on-disk format; never change.
const BatchHeaderSize = 61
