package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/diskless"
	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// disklessService is the broker's part of diskless topics (package
// diskless): the appender every diskless produce goes through, the index of
// committed coordinates and the reader that serves fetches from the bucket.
// nil when the broker has no bucket (diskless topics then answer
// KAFKA_STORAGE_ERROR).
type disklessService struct {
	appender *diskless.Appender
	index    *diskless.Index
	reader   *diskless.Reader
	merger   *diskless.Merger
	stats    *diskless.Stats
	cleaned  *disklessCleanerStates
}

// initDiskless builds the service; Start runs its index.
func (b *Broker) initDiskless() {
	if b.objects == nil {
		return
	}
	stats := &diskless.Stats{}
	index := diskless.NewIndex(b.store, b.componentLog("diskless"))
	b.diskless = &disklessService{
		appender: diskless.NewAppender(diskless.Config{Cluster: b.store.Cluster(), Linger: b.cfg.Diskless.Linger,
			MaxBytes: b.cfg.Diskless.MaxBytes, Logger: b.componentLog("diskless")}, b.store, b.objects, stats),
		index:   index,
		reader:  diskless.NewReader(index, b.objects, b.store.Cluster(), b.cfg.Diskless.CacheBytes, stats),
		stats:   stats,
		cleaned: &disklessCleanerStates{},
	}
	b.diskless.reader.SetMerged(disklessMerged{b})
	b.diskless.merger = diskless.NewMerger(diskless.MergeConfig{Cluster: b.store.Cluster(), Age: b.cfg.Diskless.MergeAge,
		Interval: b.cfg.Diskless.MergeInterval, Logger: b.componentLog("diskless")}, b.store, b.objects, b.diskless.reader,
		b.tiering, stats)
}

// runDiskless follows the committed coordinates, and merges and applies
// retention to the partitions this broker fronts, until the broker stops.
func (b *Broker) runDiskless(ctx context.Context) {
	d := b.diskless
	merged := make(chan struct{})
	go func() {
		defer close(merged)
		d.merger.Run(ctx, b.disklessOwned, b.disklessSweeper)
	}()
	d.index.Run(ctx)
	<-merged
}

// disklessOwned lists the diskless partitions this broker merges and
// applies retention to: those it would be the advertised leader of for a
// client without a zone, so that exactly one live broker handles each (two
// for a moment while brokers come and go, which the merge's idempotent
// commit and retention's compare-and-swaps tolerate).
func (b *Broker) disklessOwned() []diskless.MergePartition {
	brokers := b.liveBrks.view().list
	var out []diskless.MergePartition
	for _, t := range b.parts.disklessTopics() {
		for p := range t.Replicas {
			if diskless.Leader(t.ID, int32(p), brokers, "") == b.cfg.NodeID {
				out = append(out, diskless.MergePartition{Topic: t.Name, Part: metadata.TierPartition{TopicID: t.ID, Partition: int32(p)},
					Partitions: int32(len(t.Replicas)), Configs: t.Configs})
			}
		}
	}
	return out
}

// disklessSweeper says whether this broker sweeps the shared objects: the
// one a zero partition would be led by.
func (b *Broker) disklessSweeper() bool {
	return diskless.Leader(metadata.TopicID{}, 0, b.liveBrks.view().list, "") == b.cfg.NodeID
}

// disklessMerged reads merged diskless offsets from their segment objects
// through the cold reader and the manifest, as cold reads of classic
// topics.
type disklessMerged struct{ b *Broker }

func (m disklessMerged) ReadMerged(ctx context.Context, tp metadata.TierPartition, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	e, ok := m.b.manifest.Find(tp.TopicID, tp.Partition, offset)
	if !ok || e.LastOffset < offset {
		return nil, fmt.Errorf("%w: offset %d of %v is in no run and no merged object", hotlog.ErrOffsetOutOfRange, offset, tp)
	}
	req := tier.ColdRead{Object: tier.ColdObjectOf(e), Offset: offset, MaxBytes: maxBytes, UpTo: upTo}
	if next, ok := m.b.manifest.Find(tp.TopicID, tp.Partition, e.LastOffset+1); ok {
		obj := tier.ColdObjectOf(next)
		req.Next = &obj
	}
	return m.b.cold.Read(ctx, req)
}

// DisklessConfig configures diskless topics on this broker
// (diskless.Config documents the defaults).
type DisklessConfig struct {
	// Linger is diskless.append.linger.ms: how long a batch waits for
	// others before the shared object is written. Zero: 250 ms.
	Linger time.Duration
	// MaxBytes is diskless.append.max.bytes: the object is written at
	// once when the buffered batches reach it. Zero: 8 MiB.
	MaxBytes int
	// CacheBytes bounds the cache of whole shared objects the reader
	// keeps. Zero: 256 MiB.
	CacheBytes int64
	// MergeAge: runs committed this long ago are merged into segment
	// objects; MergeInterval: how often. Zero: diskless's defaults.
	MergeAge, MergeInterval time.Duration
}

// DisklessStats is the cost counters of diskless topics (zero without a
// bucket).
func (b *Broker) DisklessStats() diskless.StatsSnapshot {
	if b.diskless == nil {
		return diskless.StatsSnapshot{}
	}
	return b.diskless.stats.Snapshot()
}

// disklessPart is the diskless partition a request names, if its topic is
// diskless: ok false for classic topics (and unknown ones, which the
// classic lookup answers).
func (b *Broker) disklessPart(byID bool, name string, id [16]byte, partition int32) (tp metadata.TierPartition, cfg metadata.TopicConfig, code int16, ok bool) {
	var t metadata.Topic
	var found bool
	if byID {
		t, cfg, found = b.parts.disklessTopicByID(metadata.TopicID(id))
	} else {
		t, cfg, found = b.parts.disklessTopic(name)
	}
	if !found {
		return metadata.TierPartition{}, cfg, 0, false
	}
	tp = metadata.TierPartition{TopicID: t.ID, Partition: partition}
	switch {
	case partition < 0 || int(partition) >= len(t.Replicas):
		return tp, cfg, kerr.UnknownTopicOrPartition.Code, true
	case b.diskless == nil:
		return tp, cfg, kerr.KafkaStorageError.Code, true
	}
	return tp, cfg, 0, true
}

// disklessReadPart is disklessPart for the APIs answered from the index
// (Fetch, ListOffsets, OffsetForLeaderEpoch). Until the index holds its
// first snapshot (the broker just started, or etcd has not answered it
// yet) it knows no partition's positions and would put every offset out of
// range, send consumers back to their reset offset and list every log end
// as 0; the partition is OFFSET_NOT_AVAILABLE meanwhile, retriable, as a
// Kafka leader answers before its high watermark has caught up.
func (b *Broker) disklessReadPart(byID bool, name string, id [16]byte, partition int32) (metadata.TierPartition, int16, bool) {
	tp, _, code, ok := b.disklessPart(byID, name, id, partition)
	if ok && code == 0 && !b.diskless.index.Loaded() {
		code = kerr.OffsetNotAvailable.Code
	}
	return tp, code, ok
}

// produceDisklessPartition submits one produce partition if its topic is
// diskless (ok false: a classic or unknown topic, for producePartition).
// denied is the topic's authorization answer.
func (b *Broker) produceDisklessPartition(req *kmsg.ProduceRequest, rt *kmsg.ProduceRequestTopic,
	rp *kmsg.ProduceRequestTopicPartition, now int64, denied int16,
) (disklessAck, kmsg.ProduceResponseTopicPartition, bool) {
	tp, cfg, code, ok := b.disklessPart(req.Version >= 13, rt.Topic, rt.TopicID, rp.Partition)
	if !ok {
		return disklessAck{}, kmsg.ProduceResponseTopicPartition{}, false
	}
	if denied != 0 {
		code = denied // before any other answer, so existence does not leak
	}
	if code != 0 {
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.Partition, sp.ErrorCode = rp.Partition, code
		return disklessAck{}, sp, true
	}
	sp, pending, logAppendTime := b.submitDiskless(req, tp, cfg, rp, now)
	return disklessAck{tp: tp, pending: pending, logAppendTime: logAppendTime}, sp, true
}

// submitDiskless validates one produce partition of a diskless topic and
// hands it to the appender. The answer's offsets come later, from
// waitDiskless: every acks level waits for the commit, since no broker keeps
// the batches anywhere else (acks=0 gets no answer, as always).
func (b *Broker) submitDiskless(req *kmsg.ProduceRequest, tp metadata.TierPartition, cfg metadata.TopicConfig,
	rp *kmsg.ProduceRequestTopicPartition, now int64,
) (kmsg.ProduceResponseTopicPartition, *diskless.Pending, int64) {
	sp := kmsg.NewProduceResponseTopicPartition()
	sp.Partition = rp.Partition
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		setDisklessError(b, &sp, fmt.Errorf("%w: acks %d", errInvalidAcks, req.Acks))
		return sp, nil, -1
	}
	batches, err := recordbatch.SplitProduce(rp.Records, rulesFor(cfg, req.Version), now)
	if err != nil {
		setDisklessError(b, &sp, err)
		return sp, nil, -1
	}
	if code, msg := disklessTxnRefused(cfg, batches.Transactional); code != 0 {
		sp.ErrorCode, sp.ErrorMessage = code, &msg
		return sp, nil, -1
	}
	pending, err := b.diskless.appender.Submit(tp, batches.Records)
	if err != nil {
		setDisklessError(b, &sp, err)
		return sp, nil, -1
	}
	return sp, pending, batches.LogAppendTime
}

// disklessAck is a submitted diskless partition of a produce request.
type disklessAck struct {
	topic, partition int // indexes into the response
	tp               metadata.TierPartition
	pending          *diskless.Pending
	logAppendTime    int64
}

// waitDiskless waits, under the request's timeout, for every submitted
// diskless partition and fills its answer.
func (b *Broker) waitDiskless(ctx context.Context, timeoutMillis int32, resp *kmsg.ProduceResponse, acks []disklessAck) {
	if len(acks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, a := range acks {
		sp := &resp.Topics[a.topic].Partitions[a.partition]
		res, err := a.pending.Wait(ctx)
		if err != nil {
			setDisklessError(b, sp, err)
			continue
		}
		sp.BaseOffset, sp.LogAppendTime = res.BaseOffset, a.logAppendTime
		start, _, _ := b.diskless.index.Positions(a.tp)
		sp.LogStartOffset = start
	}
}

func setDisklessError(b *Broker, sp *kmsg.ProduceResponseTopicPartition, err error) {
	setProduceError(b.log, sp, err)
	if code, ok := disklessErrorCode(err); ok {
		sp.ErrorCode = code
	}
}

// disklessErrorCode maps the appender's errors to retriable Kafka codes.
func disklessErrorCode(err error) (int16, bool) {
	switch {
	case errors.Is(err, diskless.ErrObjectPut), errors.Is(err, diskless.ErrClosed):
		return kerr.KafkaStorageError.Code, true
	case errors.Is(err, diskless.ErrCommit), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code, true
	case errors.Is(err, diskless.ErrCorrupt):
		return kerr.KafkaStorageError.Code, true
	case errors.Is(err, diskless.ErrBackpressure):
		return kerr.ThrottlingQuotaExceeded.Code, true
	}
	return 0, false
}

// holdLaggingDisklessFetches answers OFFSET_NOT_AVAILABLE (retriable) for
// the diskless partitions of a planned fetch where this broker's index lags
// the commits (diskless.Index.Behind), and takes them out of the plan; a
// fetch past a partition's real end goes on to OFFSET_OUT_OF_RANGE.
func (b *Broker) holdLaggingDisklessFetches(ctx context.Context, freq *fetch.Request, slots []fetchSlot, resp *kmsg.FetchResponse) {
	var planned []int // indexes into freq.Partitions and slots
	var positions []diskless.Position
	for i, slot := range slots {
		if slot.diskless != nil && freq.Partitions[i].Partition != nil {
			planned = append(planned, i)
			positions = append(positions, diskless.Position{Part: *slot.diskless, Offset: freq.Partitions[i].Offset})
		}
	}
	if len(planned) == 0 {
		return
	}
	for j, behind := range b.diskless.index.Behind(ctx, b.store, positions) {
		if !behind {
			continue
		}
		i := planned[j]
		sp := &resp.Topics[slots[i].topic].Partitions[slots[i].partition]
		sp.ErrorCode, sp.HighWatermark = kerr.OffsetNotAvailable.Code, -1
		freq.Partitions[i].Partition = nil
	}
}

// disklessEpochEnd is the end of a diskless partition's only epoch, 0: its
// log end, read from its head in etcd rather than the index, which may lag
// (a client compares it with its position to detect a truncation, and
// nothing of a diskless partition is ever truncated).
func (b *Broker) disklessEpochEnd(ctx context.Context, tp metadata.TierPartition) (int64, int16) {
	ends, err := diskless.CommittedEnds(ctx, b.store, []metadata.TierPartition{tp})
	if err != nil {
		b.log.Warn("offset for leader epoch of a diskless partition: reading its log end failed", "partition", tp, "err", err)
		return -1, kerr.OffsetNotAvailable.Code
	}
	return ends[0], 0
}

// disklessFetchPartition is a diskless partition as package fetch reads it.
func (b *Broker) disklessFetchPartition(tp metadata.TierPartition) fetch.Partition {
	return b.diskless.reader.Partition(tp)
}

// listDisklessOffset answers ListOffsets for a diskless partition
// (02_list_offsets.go).
func (b *Broker) listDisklessOffset(ctx context.Context, tp metadata.TierPartition, code int16,
	rp *kmsg.ListOffsetsRequestTopicPartition,
) kmsg.ListOffsetsResponseTopicPartition {
	sp := kmsg.NewListOffsetsResponseTopicPartition()
	sp.Partition, sp.ErrorCode = rp.Partition, code
	if code != 0 {
		return sp
	}
	start, next, _ := b.diskless.index.Positions(tp)
	sp.Timestamp, sp.LeaderEpoch = -1, 0
	var res diskless.OffsetTime
	var found bool
	var err error
	switch rp.Timestamp {
	case listOffsetsLatest:
		sp.Offset = next
		return sp
	case listOffsetsEarliest, listOffsetsEarliestLocal:
		sp.Offset = start
		return sp
	case listOffsetsLatestTiered:
		sp.Offset = next - 1
		return sp
	case listOffsetsMaxTimestamp:
		res, found, err = b.diskless.reader.MaxTimestamp(ctx, tp)
	default:
		res, found, err = b.diskless.reader.OffsetForTimestamp(ctx, tp, rp.Timestamp)
	}
	switch {
	case err != nil:
		sp.ErrorCode = kerr.KafkaStorageError.Code
		b.log.Warn("list offsets of a diskless partition failed", "partition", tp, "err", err)
	case found:
		sp.Offset, sp.Timestamp = res.Offset, res.Timestamp
	default:
		sp.Offset = -1
	}
	return sp
}

// deleteDisklessRecords raises a diskless partition's log start
// (21_delete_records.go).
func (b *Broker) deleteDisklessRecords(ctx context.Context, tp metadata.TierPartition, cfg metadata.TopicConfig, code int16, offset int64) (int64, int16) {
	switch {
	case code != 0:
		return -1, code
	case !cfg.HasDelete():
		return -1, kerr.PolicyViolation.Code
	}
	start, err := diskless.RaiseStart(ctx, b.store, tp, offset)
	switch {
	case errors.Is(err, diskless.ErrOffsetOutOfRange):
		return -1, kerr.OffsetOutOfRange.Code
	case err != nil:
		b.log.Warn("delete records of a diskless partition failed", "partition", tp, "offset", offset, "err", err)
		return -1, kerr.RequestTimedOut.Code
	}
	return start, 0
}
