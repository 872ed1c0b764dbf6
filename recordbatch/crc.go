package recordbatch

import (
	"hash"
	"hash/crc32"
)

// castagnoli is the CRC-32C table, the one table of the module: every
// checksum Strata writes (batches, producer snapshots, tiered objects' sections
// and footers) is CRC-32C and is computed here. Read-only after package init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b: the batch CRC when b is
// a batch's bytes from PosAttributes to its end.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum returns crc extended by the bytes of p, for data that
// arrives in pieces: UpdateChecksum(Checksum(a), b) == Checksum(a+b).
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// NewChecksum returns a streaming CRC-32C, for io.Writer pipelines.
func NewChecksum() hash.Hash32 { return crc32.New(castagnoli) }
