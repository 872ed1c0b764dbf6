// Package recordbatch is the Kafka RecordBatch v2 format (magic 2): the one
// place in Strata that parses, validates, checksums, compresses, decompresses
// and encodes batches. The local log (hotlog), the tiered objects (tier),
// compaction, the broker and the group and transaction coordinators all use
// it; it imports none of them.
//
// # Layout
//
// All integers are big-endian.
//
//	offset  size  field
//	     0     8  baseOffset            set by the log on append \  not covered
//	     8     4  batchLength           bytes after this field    |  by the CRC
//	    12     4  partitionLeaderEpoch  set by the log on append  /
//	    16     1  magic (= 2)
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes 21..end
//	    21     2  attributes            bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
//	                                    bit 3 timestamp type (1 = LogAppendTime),
//	                                    bit 4 transactional, bit 5 control
//	    23     4  lastOffsetDelta
//	    27     8  firstTimestamp
//	    35     8  maxTimestamp
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordCount
//	    61     …  records (compressed as a whole when codec != 0)
//
// A batch occupies 12+batchLength bytes (LengthPrefix+batchLength); in a
// log, the next batch follows directly. MinLength <= batchLength <=
// MaxLength, so positions stay inside int32 as in Kafka.
//
// Each record in the (decompressed) records section is
//
//	length varint (bytes after it), attributes int8, timestampDelta varlong,
//	offsetDelta varint, key (varint length, -1 = null), value (likewise),
//	header count varint, then per header a key and a value
//
// and the section holds exactly recordCount records. Snappy data is either a
// raw block (franz-go, librdkafka) or the Java client's xerial framing; both
// are read, a raw block is written.
//
// # Checks
//
// Three levels, for three kinds of input:
//
//   - Validate: a batch from a producer. Magic 0/1 gives ErrUnsupportedMagic
//     (magic sits at byte 16 in every message format, which is how it is
//     recognised); framing, magic 2, CRC, a known codec, and recordCount ==
//     lastOffsetDelta+1 >= 1, else ErrCorrupt.
//   - ValidateStored: a batch read back from storage or a leader. Compaction
//     leaves batches with fewer records than lastOffsetDelta+1 (even none),
//     so it requires only 0 <= recordCount <= lastOffsetDelta+1.
//   - CheckStored: ValidateStored without the codec check, for the local
//     log's reads and recovery, which never decompress.
//
// None of them decompresses. DecodeRecords and Decompressor decompress and
// parse the records with a caller's bound on the decompressed size
// (ErrDecompressedTooLarge): a zip bomb fails before its output is
// allocated. Record counts and lengths are bounded by the bytes present
// before anything is allocated, so no input can make a decoder allocate
// more than a small multiple of its size or of the bound.
//
// # Produce checks
//
// SplitProduce checks one produce partition's records bytes as a client
// sent them: at least one batch, each Validate'd, then the ProduceRules
// the broker derives from the topic and the request (max.message.bytes
// against the whole batch, no control batches, transactional batches with
// a producer id and one transactional producer per partition, zstd only
// from produce v7, keys on every record of a compacted topic, the one
// case that decodes records, within a 64 MiB bound). With LogAppendTime it
// stamps each batch in place. Its sentinel errors keep the texts clients
// have always seen; the broker maps them to Kafka codes.
//
// # CRC-32C
//
// Checksum is the batch CRC when applied to bytes 21..end. Every other
// checksum Strata writes (producer snapshots, tiered objects' sections,
// chunks and footers) is CRC-32C too and uses Checksum, UpdateChecksum or
// NewChecksum, so the module builds one table.
package recordbatch
