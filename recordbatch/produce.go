package recordbatch

// Produce-side checks: split one produce partition's records bytes into
// batches, validate each header (never the records: batches stay bytes,
// compressed as sent), and apply the produce rules.

import (
	"errors"
	"fmt"
)

// Produce-side sentinel errors; the broker maps them to Kafka codes. Their
// texts reach clients (ProduceResponse error messages, v8+) and are kept
// as clients have always seen them, "broker:" prefix included.
var (
	ErrNoBatches               = errors.New("broker: produce partition data holds no record batch")
	ErrBatchTooLarge           = errors.New("broker: record batch larger than max.message.bytes")
	ErrControlBatch            = errors.New("broker: clients may not produce control batches")
	ErrTransactionalNoProducer = errors.New("broker: transactional batch without a producer id")
	ErrMixedTxn                = errors.New("broker: transactional batches of several producers in one partition")
	ErrZstdTooOld              = errors.New("broker: zstd batches need produce v7+")
	ErrKeylessCompacted        = errors.New("broker: compacted topic cannot accept a record without a key")
)

// maxKeyCheckDecompressed bounds the decompressed records of one batch
// whose keys are checked (compacted topics): a larger batch is refused
// rather than inflated without bound.
const maxKeyCheckDecompressed = 64 << 20

// ProduceRules are what one produce partition's batches are checked
// against: the topic's settings and the request's version, derived by the
// broker.
type ProduceRules struct {
	// MaxMessageBytes bounds each batch's total size (max.message.bytes,
	// compared with the whole batch including its 12-byte prefix, as Kafka).
	MaxMessageBytes int
	// LogAppendTime: message.timestamp.type=LogAppendTime.
	LogAppendTime bool
	// ProduceVersion of the request (zstd needs v7+).
	ProduceVersion int16
	// Compacted: cleanup.policy has compact, so every record needs a key
	// (the one case where the produce path decodes records, as Kafka).
	Compacted bool
}

// Produced is one partition's validated records, ready for Append.
type Produced struct {
	// Records are the batches end to end; they alias the request.
	Records []byte
	// Count is the number of batches.
	Count int
	// ProducerID of the first batch (-1: not idempotent).
	ProducerID int64
	// LogAppendTime is the stamp applied, or -1 (CreateTime).
	LogAppendTime int64
	// Transactional: some batch is transactional; TxnProducerID and
	// TxnEpoch are then its producer (one per partition, checked), for
	// the broker's KIP-890 verification.
	Transactional bool
	TxnProducerID int64
	TxnEpoch      int16
}

// SplitProduce validates the records bytes of one produce partition:
// at least one batch, every batch's length in bounds, magic 2, CRC-32C,
// counts, no control batches (markers come only through WriteTxnMarkers),
// transactional ones only with a producer id, none larger than
// max.message.bytes. With LogAppendTime each batch is stamped with now (ms),
// which rewrites its maxTimestamp and CRC in place. Nothing is allocated per
// batch and records are decoded only for compacted topics (keys).
func SplitProduce(records []byte, rules ProduceRules, now int64) (Produced, error) {
	out := Produced{Records: records, ProducerID: -1, LogAppendTime: -1}
	if len(records) == 0 {
		return out, ErrNoBatches
	}
	for rest := records; len(rest) > 0; out.Count++ {
		header, size, err := Validate(rest)
		if err != nil {
			return out, err
		}
		if err := checkProduceRules(header, size, rules); err != nil {
			return out, err
		}
		if rules.Compacted {
			if err := checkKeys(rest[:size]); err != nil {
				return out, err
			}
		}
		if out.Count == 0 {
			out.ProducerID = header.ProducerID
		}
		if err := out.noteTxn(header); err != nil {
			return out, err
		}
		if rules.LogAppendTime {
			SetLogAppendTime(rest[:size], now)
			out.LogAppendTime = now
		}
		rest = rest[size:]
	}
	return out, nil
}

// checkKeys refuses a batch holding a record without a key (compacted
// topics: Kafka's INVALID_RECORD, "Compacted topic cannot accept message
// without key"). Undecodable records are a corrupt batch.
func checkKeys(batch []byte) error { return CheckKeys(batch, maxKeyCheckDecompressed) }

// noteTxn records the producer of a transactional batch and rejects a
// second transactional producer in the same partition data: verification
// covers one (producer id, epoch), so a mix could bypass it.
func (out *Produced) noteTxn(h Header) error {
	if !h.Transactional() {
		return nil
	}
	if out.Transactional && (out.TxnProducerID != h.ProducerID || out.TxnEpoch != h.ProducerEpoch) {
		return ErrMixedTxn
	}
	out.Transactional, out.TxnProducerID, out.TxnEpoch = true, h.ProducerID, h.ProducerEpoch
	return nil
}

// checkProduceRules applies the topic and protocol rules to one valid batch.
func checkProduceRules(h Header, size int, rules ProduceRules) error {
	switch {
	case size > rules.MaxMessageBytes:
		return fmt.Errorf("%w: %d > %d bytes", ErrBatchTooLarge, size, rules.MaxMessageBytes)
	case h.Control():
		return ErrControlBatch
	case h.Transactional() && h.ProducerID < 0:
		// A transactional batch must carry a producer id (Kafka's
		// validation: INVALID_RECORD). The KIP-890 verification that the
		// partition was added to the transaction is the broker's.
		return ErrTransactionalNoProducer
	case h.Codec() == CodecZstd && rules.ProduceVersion < 7:
		return ErrZstdTooOld
	}
	return nil
}
