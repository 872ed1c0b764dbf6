package broker

// Produce-side record batch checks: split one partition's records bytes
// into RecordBatch v2 batches, validate each header (never the records:
// batches stay bytes, compressed as sent), and apply topic rules. The batch
// layout is documented in hotlog/doc.go.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Produce-path sentinel errors; produceErrorCode maps them to Kafka codes.
var (
	errNoBatches        = errors.New("broker: produce partition data holds no record batch")
	errBatchTooLarge    = errors.New("broker: record batch larger than max.message.bytes")
	errControlBatch     = errors.New("broker: clients may not produce control batches")
	errTransactional    = errors.New("broker: transactional batch without a producer id")
	errMixedTxn         = errors.New("broker: transactional batches of several producers in one partition")
	errZstdTooOld       = errors.New("broker: zstd batches need produce v7+")
	errInvalidAcks      = errors.New("broker: acks must be -1, 0 or 1")
	errNotEnoughISR     = errors.New("broker: in-sync replicas below min.insync.replicas")
	errAcksZeroFailure  = errors.New("broker: acks=0 produce failed; closing the connection so the client refreshes metadata")
	errKeylessCompacted = errors.New("broker: compacted topic cannot accept a record without a key")
)

// maxKeyCheckDecompressed bounds the decompressed records of one batch
// whose keys are checked (compacted topics): a larger batch is refused
// rather than inflated without bound.
const maxKeyCheckDecompressed = 64 << 20

// logAppendTimeType is the message.timestamp.type value that makes the
// broker stamp batches.
const logAppendTimeType = "LogAppendTime"

// produceRules are the topic settings a produce partition is checked against.
type produceRules struct {
	// maxMessageBytes bounds each batch's total size (max.message.bytes,
	// compared with the whole batch including its 12-byte prefix, as Kafka).
	maxMessageBytes int
	// logAppendTime: message.timestamp.type=LogAppendTime.
	logAppendTime bool
	// produceVersion of the request (zstd needs v7+).
	produceVersion int16
	// compacted: cleanup.policy has compact, so every record needs a key
	// (the one case where the produce path decodes records, as Kafka).
	compacted bool
}

// rulesFor derives the produce rules from a topic's effective config.
func rulesFor(cfg metadata.TopicConfig, version int16) produceRules {
	return produceRules{
		maxMessageBytes: int(cfg.MaxMessageBytes),
		logAppendTime:   cfg.MessageTimestampType == logAppendTimeType,
		produceVersion:  version,
		compacted:       cfg.HasCompact(),
	}
}

// producedBatches is one partition's validated records, ready for Append.
type producedBatches struct {
	// records are the batches end to end; they alias the request.
	records []byte
	// count is the number of batches.
	count int
	// producerID of the first batch (-1: not idempotent). Sequence checks
	// on it come with issue 6.
	producerID int64
	// logAppendTime is the stamp applied, or -1 (CreateTime).
	logAppendTime int64
	// transactional: some batch is transactional; txnProducerID and
	// txnEpoch are then its producer (one per partition, checked), for
	// the KIP-890 verification (txn_verify.go).
	transactional bool
	txnProducerID int64
	txnEpoch      int16
}

// splitProduceRecords validates the records bytes of one produce partition:
// at least one batch, every batch's length in bounds, magic 2, CRC-32C,
// counts, no control batches (markers come only through WriteTxnMarkers),
// transactional ones only with a producer id, none larger than
// max.message.bytes. With LogAppendTime each batch is stamped with now (ms),
// which rewrites its maxTimestamp and CRC in place. Nothing is allocated per
// batch and records are decoded only for compacted topics (keys).
func splitProduceRecords(records []byte, rules produceRules, now int64) (producedBatches, error) {
	out := producedBatches{records: records, producerID: -1, logAppendTime: -1}
	if len(records) == 0 {
		return out, errNoBatches
	}
	for rest := records; len(rest) > 0; out.count++ {
		header, size, err := recordbatch.Validate(rest)
		if err != nil {
			return out, err
		}
		if err := checkBatchRules(header, size, rules); err != nil {
			return out, err
		}
		if rules.compacted {
			if err := checkKeys(rest[:size]); err != nil {
				return out, err
			}
		}
		if out.count == 0 {
			out.producerID = header.ProducerID
		}
		if err := out.noteTxn(header); err != nil {
			return out, err
		}
		if rules.logAppendTime {
			recordbatch.SetLogAppendTime(rest[:size], now)
			out.logAppendTime = now
		}
		rest = rest[size:]
	}
	return out, nil
}

// checkKeys refuses a batch holding a record without a key (compacted
// topics: Kafka's INVALID_RECORD, "Compacted topic cannot accept message
// without key"). Undecodable records are a corrupt batch.
func checkKeys(batch []byte) error {
	records, err := recordbatch.DecodeRecords(batch, maxKeyCheckDecompressed)
	if err != nil {
		return err
	}
	for i := range records {
		if records[i].Key == nil {
			return fmt.Errorf("%w (offset delta %d)", errKeylessCompacted, records[i].OffsetDelta)
		}
	}
	return nil
}

// noteTxn records the producer of a transactional batch and rejects a
// second transactional producer in the same partition data: verification
// covers one (producer id, epoch), so a mix could bypass it.
func (out *producedBatches) noteTxn(h recordbatch.Header) error {
	if !h.Transactional() {
		return nil
	}
	if out.transactional && (out.txnProducerID != h.ProducerID || out.txnEpoch != h.ProducerEpoch) {
		return errMixedTxn
	}
	out.transactional, out.txnProducerID, out.txnEpoch = true, h.ProducerID, h.ProducerEpoch
	return nil
}

// checkBatchRules applies the topic and protocol rules to one valid batch.
func checkBatchRules(h recordbatch.Header, size int, rules produceRules) error {
	switch {
	case size > rules.maxMessageBytes:
		return fmt.Errorf("%w: %d > %d bytes", errBatchTooLarge, size, rules.maxMessageBytes)
	case h.Control():
		return errControlBatch
	case h.Transactional() && h.ProducerID < 0:
		// A transactional batch must carry a producer id (Kafka's
		// validation: INVALID_RECORD). The KIP-890 verification that the
		// partition was added to the transaction is in txn_verify.go.
		return errTransactional
	case h.Codec() == recordbatch.CodecZstd && rules.produceVersion < 7:
		return errZstdTooOld
	}
	return nil
}

// produceErrorCode translates a produce-path error into a Kafka error code.
func produceErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, hotlog.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, hotlog.ErrCorruptBatch):
		return kerr.CorruptMessage.Code
	case errors.Is(err, errBatchTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, errNoBatches), errors.Is(err, errControlBatch), errors.Is(err, errTransactional),
		errors.Is(err, errMixedTxn), errors.Is(err, errKeylessCompacted):
		return kerr.InvalidRecord.Code
	case errors.Is(err, recordbatch.ErrDecompressedTooLarge):
		return kerr.CorruptMessage.Code
	case errors.Is(err, errZstdTooOld):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, errInvalidAcks):
		return kerr.InvalidRequiredAcks.Code
	case errors.Is(err, errNotEnoughISR):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, errUploadLag):
		return kerr.ThrottlingQuotaExceeded.Code
	}
	if code, ok := txnVerifyErrorCode(err); ok {
		return code
	}
	return dataPathErrorCode(err)
}

// dataPathErrorCode translates log and wait errors shared by every data-path
// API into Kafka error codes.
func dataPathErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, hotlog.ErrOffsetOutOfRange), errors.Is(err, fetch.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, hotlog.ErrStorage), errors.Is(err, hotlog.ErrCorruptBatch):
		// A damaged stored batch is never served: the client retries
		// (later against a replica or the tier).
		return kerr.KafkaStorageError.Code
	case errors.Is(err, hotlog.ErrClosed):
		// The partition moved or was deleted under the request: the client
		// refreshes metadata and retries.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		// The connection or the broker is closing; the answer is likely
		// never read, but if it is, it must be retriable.
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownServerError.Code
}
