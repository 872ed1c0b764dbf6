package broker

import (
	"context"
	"math"
	"time"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/lag"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Consumer-group lag and retention margins (package lag): the monitor
// reads the groups this broker coordinates and the partitions it holds a
// replica of, every ConsumerLagInterval; /metrics reads its last result.
// A group's partition held on no replica here has no series on this
// broker. The same loop publishes the retention holds of the groups
// coordinated here (metadata.RetentionHold, read by tier's retention).

// startLagMonitor starts the monitor's loop and hands the coordinator
// what its skip check needs.
func (b *Broker) startLagMonitor() {
	src := lagSource{b}
	b.lagMonitor = lag.NewMonitor(lag.MonitorConfig{WarnMargin: b.cfg.RetentionWarnMargin,
		Logger: b.componentLog("lag")}, src)
	b.groups.SetLogStart(src.logStart)
	b.loops.Add(1)
	go func() {
		defer b.loops.Done()
		t := time.NewTicker(b.cfg.ConsumerLagInterval)
		defer t.Stop()
		for {
			b.lagMonitor.Refresh(time.Now())
			b.publishRetentionHolds()
			select {
			case <-b.lifetime.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// ConsumerGroupLag returns every group's lag and retention margin per
// partition, as of the last refresh (nil before the broker started).
func (b *Broker) ConsumerGroupLag() []lag.Series {
	if b.lagMonitor == nil {
		return nil
	}
	return b.lagMonitor.Series()
}

// SkippedRecords returns the records each group skipped because retention
// deleted them before it read them, per partition, since start.
func (b *Broker) SkippedRecords() []group.Skipped { return b.groups.SkippedRecords() }

// lagSource is lag.Source over the broker.
type lagSource struct{ b *Broker }

func (s lagSource) CommittedOffsets() []lag.Committed {
	offsets := s.b.groups.CommittedOffsets()
	out := make([]lag.Committed, len(offsets))
	for i, o := range offsets {
		out[i] = lag.Committed{Group: o.Group, Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, CommitMs: o.CommitTimestamp}
	}
	return out
}

// Partition describes a hosted partition's log as retention sees it: the
// objects in the bucket, then the local segments above them, then the
// active segment (still growing: its max timestamp is taken as now).
func (s lagSource) Partition(topic string, index int32) (lag.Partition, int64, bool) {
	p, ok := s.b.parts.hosted(topic, index)
	if !ok {
		return lag.Partition{}, 0, false
	}
	cfg := p.config()
	out := lag.Partition{LogStart: p.logStartOffset(), HighWatermark: p.highWatermark(), Delete: cfg.HasDelete(),
		RetentionMs: cfg.RetentionMs, RetentionBytes: cfg.RetentionBytes}
	if s.b.tieringEnabled(topic, cfg) {
		out.HoldMs, _ = s.b.cfg.Tier.EffectiveHold(cfg)
	}
	localFrom := int64(math.MinInt64)
	for _, e := range p.manifest.Segments(p.topicID, p.index) {
		out.Segments = append(out.Segments, lag.Segment{BaseOffset: e.BaseOffset, LastOffset: e.LastOffset,
			MaxTimestamp: e.MaxTimestamp, Bytes: e.Size})
		localFrom = e.LastOffset + 1
	}
	sealed := int64(0)
	for _, seg := range p.log.SealedSegments() {
		sealed += seg.Size
		if seg.BaseOffset >= localFrom {
			out.Segments = append(out.Segments, lag.Segment{BaseOffset: seg.BaseOffset, LastOffset: seg.NextOffset - 1,
				MaxTimestamp: seg.MaxTimestamp, Bytes: seg.Size})
		}
	}
	logEnd := p.log.LogEndOffset()
	if active := p.log.Size() - sealed; active > 0 {
		base := max(localFrom, p.log.LogStartOffset())
		if n := len(out.Segments); n > 0 {
			base = max(base, out.Segments[n-1].LastOffset+1)
		}
		out.Segments = append(out.Segments, lag.Segment{BaseOffset: base, LastOffset: logEnd - 1,
			MaxTimestamp: time.Now().UnixMilli(), Bytes: active})
	}
	return out, logEnd, true
}

// RecordTimestamp is the first timestamp of the batch holding offset: read
// from the local log, or the first timestamp of the bucket object holding
// it (cheaper than a GET; an object's first timestamp is at or before the
// record's).
func (s lagSource) RecordTimestamp(topic string, index int32, offset int64) (int64, bool) {
	p, ok := s.b.parts.hosted(topic, index)
	if !ok {
		return 0, false
	}
	if offset >= p.log.LogStartOffset() {
		data, err := p.log.Read(offset, 1, p.highWatermark())
		if err != nil || len(data) < recordbatch.HeaderSize {
			return 0, false
		}
		h, err := recordbatch.ParseHeader(data)
		if err != nil {
			return 0, false
		}
		return h.FirstTimestamp, true
	}
	for _, e := range p.manifest.Segments(p.topicID, p.index) {
		if e.BaseOffset <= offset && offset <= e.LastOffset {
			return e.FirstTimestamp, true
		}
	}
	return 0, false
}

// logStart is group.LogStart over a hosted partition.
func (s lagSource) logStart(topic string, index int32) (int64, int64, bool) {
	p, ok := s.b.parts.hosted(topic, index)
	if !ok {
		return 0, 0, false
	}
	start := p.logStartOffset()
	ts, _ := s.RecordTimestamp(topic, index, start)
	return start, ts, true
}

// publishRetentionHolds publishes, for topics with a retention hold, the
// committed offsets of the groups coordinated here that committed within
// the offsets retention; written only when they changed.
func (b *Broker) publishRetentionHolds() {
	now := time.Now()
	active := now.Add(-b.cfg.Group.WithDefaults().OffsetsRetention).UnixMilli()
	var holds []metadata.RetentionHold
	for _, o := range b.groups.CommittedOffsets() {
		if o.CommitTimestamp < active {
			continue
		}
		t, ok := b.parts.topic(o.Topic)
		if !ok || !b.cfg.Tier.Holds(t.cfg) || t.cfg.DisklessEnable {
			continue // diskless topics have no tier manifest for a hold to keep
		}
		holds = append(holds, metadata.RetentionHold{TopicID: t.topic.ID, Partition: o.Partition, Group: o.Group,
			Offset: o.Offset, CommitMs: o.CommitTimestamp})
	}
	if len(holds) > metadata.MaxRetentionHolds {
		holds = holds[:metadata.MaxRetentionHolds]
	}
	value, err := metadata.EncodeRetentionHolds(holds)
	if err != nil || string(value) == b.publishedHolds {
		return
	}
	ctx, cancel := context.WithTimeout(b.lifetime, 10*time.Second)
	defer cancel()
	if err := b.store.PublishRetentionHolds(ctx, b.cfg.NodeID, holds); err != nil {
		if b.lifetime.Err() == nil {
			b.log.Warn("publishing retention holds; the next refresh retries", "err", err)
		}
		return
	}
	b.publishedHolds = string(value)
}
