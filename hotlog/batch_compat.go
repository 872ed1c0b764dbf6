package hotlog

import "github.com/strata-log/strata/recordbatch"

// Deprecated forwarders to package recordbatch, kept only while a few
// broker files still name them; new code uses recordbatch directly.

// BatchHeader is recordbatch.Header.
//
// Deprecated: use recordbatch.Header.
type BatchHeader = recordbatch.Header

// BatchHeaderSize is recordbatch.HeaderSize.
//
// Deprecated: use recordbatch.HeaderSize.
const BatchHeaderSize = recordbatch.HeaderSize

// ParseBatchHeader is recordbatch.ParseHeader.
//
// Deprecated: use recordbatch.ParseHeader.
func ParseBatchHeader(b []byte) (BatchHeader, error) { return recordbatch.ParseHeader(b) }

// ValidateBatch is recordbatch.Validate.
//
// Deprecated: use recordbatch.Validate.
func ValidateBatch(b []byte) (BatchHeader, int, error) { return recordbatch.Validate(b) }
