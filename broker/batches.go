package broker

// The produce path's rules and errors: the topic settings a produce
// partition is checked against (the checks themselves are
// recordbatch.SplitProduce), and the Kafka codes of produce and data-path
// errors.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Produce-path sentinel errors beside recordbatch's; produceErrorCode maps
// them to Kafka codes.
var (
	errInvalidAcks     = errors.New("broker: acks must be -1, 0 or 1")
	errNotEnoughISR    = errors.New("broker: in-sync replicas below min.insync.replicas")
	errAcksZeroFailure = errors.New("broker: acks=0 produce failed; closing the connection so the client refreshes metadata")
)

// logAppendTimeType is the message.timestamp.type value that makes the
// broker stamp batches.
const logAppendTimeType = "LogAppendTime"

// rulesFor derives the produce rules from a topic's effective config.
func rulesFor(cfg metadata.TopicConfig, version int16) recordbatch.ProduceRules {
	return recordbatch.ProduceRules{
		MaxMessageBytes: int(cfg.MaxMessageBytes),
		LogAppendTime:   cfg.MessageTimestampType == logAppendTimeType,
		ProduceVersion:  version,
		Compacted:       cfg.HasCompact(),
	}
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
	case errors.Is(err, recordbatch.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, recordbatch.ErrNoBatches), errors.Is(err, recordbatch.ErrControlBatch),
		errors.Is(err, recordbatch.ErrTransactionalNoProducer), errors.Is(err, recordbatch.ErrMixedTxn),
		errors.Is(err, recordbatch.ErrKeylessCompacted):
		return kerr.InvalidRecord.Code
	case errors.Is(err, recordbatch.ErrDecompressedTooLarge):
		return kerr.CorruptMessage.Code
	case errors.Is(err, recordbatch.ErrZstdTooOld):
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
