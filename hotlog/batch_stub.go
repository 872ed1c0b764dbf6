package hotlog

// STUB: replaced by the hotlog implementer.

// ParseBatchHeader decodes the header of the batch at the start of b without
// checking the CRC. It fails with ErrCorruptBatch if b is shorter than the
// header or than the batch length says, or the length is out of bounds.
func ParseBatchHeader(b []byte) (BatchHeader, error) { panic("unimplemented") }

// ValidateBatch checks the batch at the start of b as the produce path and
// recovery need: length in bounds, magic 2 (ErrUnsupportedMagic for 0/1),
// CRC-32C over attributes..end, record count >= 1 and == lastOffsetDelta+1.
// It returns the header and the batch's total size in bytes.
func ValidateBatch(b []byte) (BatchHeader, int, error) { panic("unimplemented") }

// SetLogAppendTime marks the batch at the start of b as LogAppendTime
// (attributes bit 3), sets its maxTimestamp to ts and recomputes the CRC.
func SetLogAppendTime(b []byte, ts int64) { panic("unimplemented") }
