package recordbatch

import "errors"

// Sentinel errors. Callers translate them to Kafka error codes at the edge.
var (
	// ErrCorrupt means a batch fails framing, CRC, header or record
	// checks (CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("recordbatch: corrupt record batch")
	// ErrUnsupportedMagic means a magic 0 or 1 message set
	// (UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedMagic = errors.New("recordbatch: unsupported batch magic")
	// ErrDecompressedTooLarge means a batch's records decompress to more
	// than the caller's bound (a zip bomb or simply a batch larger than
	// allowed).
	ErrDecompressedTooLarge = errors.New("recordbatch: decompressed records exceed limit")
)
