package recordbatch

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppendRecord appends r to dst as one record of a records section, its
// length prefix computed from the encoding (r.Length is ignored).
func AppendRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)[1:] // drop the zero length: a one-byte varint
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// EachRecord calls fn with each record of an uncompressed records section,
// in order, stopping at fn's first error, which it returns. Each record's
// length is bounded by the bytes left; a malformed record gives ErrCorrupt.
// Records alias section. Unlike DecodeRecords it does not hold the section
// to a record count: readers of their own logs take what is there.
func EachRecord(section []byte, fn func(r *kmsg.Record) error) error {
	for len(section) > 0 {
		length, n := binary.Varint(section)
		if n <= 0 || length < 0 || length > int64(len(section)-n) {
			return fmt.Errorf("%w: record length", ErrCorrupt)
		}
		var rec kmsg.Record
		end := n + int(length)
		if err := rec.ReadFrom(section[:end]); err != nil {
			return fmt.Errorf("%w: record: %v", ErrCorrupt, err)
		}
		section = section[end:]
		if err := fn(&rec); err != nil {
			return err
		}
	}
	return nil
}
