package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// tieringEnabled reports whether a topic's sealed segments go to the bucket:
// a bucket is configured and remote.storage.enable is on, for any cleanup
// policy (compacted topics are cleaned in the bucket too, compaction/cleaner_tier.go).
// __consumer_offsets is tiered whenever a bucket is configured, whatever
// its configs, so `strata restore --as-of` can read group offsets as of a
// time from the bucket; it keeps its whole log locally too (keepsLocalLog).
// __transaction_state is never tiered (its coordinator loads it from the
// local log and nothing needs its history).
func (b *Broker) tieringEnabled(topic string, cfg metadata.TopicConfig) bool {
	if b.objects == nil || topic == txn.TopicName {
		return false
	}
	return topic == group.OffsetsTopic || cfg.RemoteStorageEnable
}

// keepsLocalLog reports whether a tiered topic keeps its local log as an
// untiered one would (local.retention.* does not apply, the bucket cleaner
// skips it): __consumer_offsets, whose group coordinator loads from the
// local log, and whose uncleaned history in the bucket is what restore
// reads offsets as of a time from.
func keepsLocalLog(topic string) bool { return topic == group.OffsetsTopic }

// tierLoop runs the uploader until the broker stops. It never does
// object-store I/O itself (uploads run in their own goroutines), so a
// bucket that hangs cannot stop the upload lag from being refreshed.
func (b *Broker) tierLoop() {
	defer b.loops.Done()
	defer b.tiering.running.Wait() // uploads end with b.lifetime
	upload := time.NewTicker(b.cfg.Tier.UploadInterval)
	defer upload.Stop()
	for {
		select {
		case <-b.lifetime.Done():
			return
		case <-upload.C:
		case <-b.tiering.kick:
		}
		b.uploadRound(b.lifetime)
	}
}

// tierJanitorLoop deletes objects whose manifest entries are gone once due
// (retention's, and the swapped-out objects of merges and tiered cleaning),
// runs the orphan sweeper and merges small objects (tiering_merge.go),
// until the broker stops.
func (b *Broker) tierJanitorLoop() {
	defer b.loops.Done()
	deletes := time.NewTicker(max(b.cfg.Tier.ObjectDeleteDelay/2, 10*time.Millisecond))
	defer deletes.Stop()
	sweep := time.NewTicker(b.cfg.Tier.SweepInterval)
	defer sweep.Stop()
	merge, stopMerge := b.mergeTicks()
	defer stopMerge()
	for {
		select {
		case <-b.lifetime.Done():
			return
		case now := <-deletes.C:
			b.deleteDueObjects(b.lifetime, now)
			deleteCompactedObjects(b.lifetime, b.compactor, b.cold, b.log)
		case now := <-sweep.C:
			b.sweepOrphans(b.lifetime, now)
		case now := <-merge:
			b.mergeTierRound(b.lifetime, now)
		}
	}
}

// kickUploader wakes the uploader early; never blocks.
func (b *Broker) kickUploader() {
	select {
	case b.tiering.kick <- struct{}{}:
	default:
	}
}

// uploadRound refreshes the upload lag of every led partition with
// tiering on, rolls the active segments that tier.upload.max.lag.ms says
// are due (tiering_bound.go), and starts an upload of its pending segments where none runs,
// at most UploadConcurrency at a time. It does not wait for the uploads:
// one hanging on an unreachable bucket must not stop the lag (and so the
// throttling) of the others from being updated.
func (b *Broker) uploadRound(ctx context.Context) {
	for _, p := range b.parts.localPartitions() {
		if p.leader() != b.cfg.NodeID || !b.tieringEnabled(p.topic, p.config()) || p.config().RemoteLogCopyDisable {
			continue
		}
		b.rollForUploadBound(p, time.Now())
		b.updateUploadLag(p)
		if len(b.pendingSegments(p)) == 0 || !b.claimUpload(p) {
			continue
		}
		b.tiering.running.Add(1)
		go func() {
			defer b.tiering.running.Done()
			err := b.uploadPartition(ctx, p)
			b.releaseUpload(p, err)
		}()
	}
}

// claimUpload marks p busy and takes an upload slot, unless p is uploading
// or backing off, or every slot is taken.
func (b *Broker) claimUpload(p *partition) bool {
	t := &b.tiering
	t.mu.Lock()
	defer t.mu.Unlock()
	key := tp(p)
	st := t.parts[key]
	if st == nil {
		st = &uploadState{}
		t.parts[key] = st
	}
	if st.busy || time.Now().Before(st.notBefore) {
		return false
	}
	select {
	case t.slots <- struct{}{}:
	default:
		return false
	}
	st.busy = true
	return true
}

// releaseUpload records the outcome: a failure backs the partition off
// exponentially (RetryBackoff doubling up to MaxRetryBackoff).
func (b *Broker) releaseUpload(p *partition, err error) {
	t := &b.tiering
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.parts[tp(p)]
	st.busy = false
	<-t.slots
	b.kickUploader() // a slot is free: other partitions need not wait a whole interval
	if err == nil || errors.Is(err, context.Canceled) {
		st.failures, st.lastErr, st.notBefore = 0, "", time.Time{}
		return
	}
	st.failures++
	t.counters.UploadFailures++
	wait := b.cfg.Tier.RetryBackoff << min(st.failures-1, 16)
	wait = min(wait, b.cfg.Tier.MaxRetryBackoff)
	st.notBefore, st.lastErr = time.Now().Add(wait), err.Error()
	if st.failures == 1 || st.failures%10 == 0 {
		b.log.Warn("tier upload failed; retrying", "topic", p.topic, "partition", p.index,
			"failures", st.failures, "retry_in", wait, "err", err)
	}
}

func tp(p *partition) metadata.TierPartition {
	return metadata.TierPartition{TopicID: p.topicID, Partition: p.index}
}

// uploadPartition uploads p's pending segments in offset order, stopping
// at the first failure so the manifest never gets a gap.
func (b *Broker) uploadPartition(ctx context.Context, p *partition) error {
	defer b.updateUploadLag(p)
	for _, seg := range b.pendingSegments(p) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := b.uploadSegment(ctx, p, seg); err != nil {
			return fmt.Errorf("segment %d: %w", seg.BaseOffset, err)
		}
		b.updateUploadLag(p)
	}
	return nil
}

// pendingSegments lists p's sealed, non-empty segments wholly below the HW
// that the manifest does not cover yet and that are not wholly deleted
// (below the log start).
func (b *Broker) pendingSegments(p *partition) []hotlog.SegmentInfo {
	hw := min(p.highWatermark(), p.lastStableOffset())
	covered, _ := p.manifest.ContiguousEnd(p.topicID, p.index)
	start := p.logStartOffset()
	var out []hotlog.SegmentInfo
	for _, s := range p.log.SealedSegments() {
		if s.Size == 0 || s.NextOffset <= covered || s.NextOffset <= start {
			continue
		}
		if s.NextOffset > hw {
			break
		}
		out = append(out, s)
	}
	return out
}

// uploadSegment writes one segment object, verifies it, commits its
// manifest entry and records it locally. Only after this may local
// retention delete the segment.
func (b *Broker) uploadSegment(ctx context.Context, p *partition, seg hotlog.SegmentInfo) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Tier.UploadTimeout)
	defer cancel()
	if err := b.ensureTopicFile(ctx, p); err != nil {
		return err
	}
	f, size, err := p.log.OpenSealedSegment(seg.BaseOffset)
	if err != nil {
		return err
	}
	defer f.Close()
	part, err := b.uncoveredPart(p, seg, f, size)
	if err != nil {
		return err
	}
	epoch := max(p.leaderEpoch(), 0)
	obj, err := tier.EncodeSegmentObject(part.log, part.size, tier.SegmentMeta{
		Topic: p.topic, TopicID: p.topicID, Partition: p.index, UploadEpoch: epoch,
		ProducerSnapshot: b.segmentEndSnapshot(p, seg), AbortedTxns: tierAborted(part.aborted)})
	if err != nil {
		return err
	}
	key, err := b.attemptKey(p, part.from, tier.SegmentKeyParts{Cluster: b.store.Cluster(), Topic: p.topic,
		TopicID: p.topicID, Partition: p.index, BaseOffset: obj.Footer().BaseOffset, Epoch: epoch})
	if err != nil {
		return err
	}
	if err := b.objects.Put(ctx, key, obj.NewReader(), obj.Size()); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := tier.Verify(ctx, b.objects, key, obj.Footer(), false); err != nil {
		return fmt.Errorf("verify %s: %w", key, err)
	}
	return b.commitSegment(ctx, p, entryFor(p, obj, key))
}

// segmentPart is the part of a sealed segment an upload takes: its .log
// bytes from the batch holding from, and the aborts whose markers lie there.
type segmentPart struct {
	log     io.ReaderAt
	size    int64
	from    int64
	aborted []hotlog.AbortedTxn
}

// uncoveredPart is the part of seg the manifest does not cover yet: all of
// it, unless the bucket already holds its first offsets. That happens
// after a leadership change, since each replica rolls its own segments
// (by size at different appends, and by age for tier.upload.max.lag.ms on
// the leader only), so the new leader's segment may straddle the end of
// what the old leader uploaded; uploading it whole would give the manifest
// two entries for the same offsets.
func (b *Broker) uncoveredPart(p *partition, seg hotlog.SegmentInfo, f io.ReaderAt, size int64) (segmentPart, error) {
	covered, _ := p.manifest.ContiguousEnd(p.topicID, p.index)
	if covered <= seg.BaseOffset {
		return segmentPart{log: f, size: size, from: seg.BaseOffset, aborted: seg.AbortedTxns}, nil
	}
	pos, err := p.log.SealedPosition(seg.BaseOffset, covered)
	if err != nil {
		return segmentPart{}, err
	}
	part := segmentPart{log: io.NewSectionReader(f, pos, size-pos), size: size - pos, from: covered}
	for _, a := range seg.AbortedTxns {
		if a.LastOffset >= covered {
			part.aborted = append(part.aborted, a)
		}
	}
	return part, nil
}

// maxTieredSnapshotBytes keeps the producer snapshot well inside the
// object's index budget (tier.MaxIndexSectionBytes for all index sections).
const maxTieredSnapshotBytes = tier.MaxIndexSectionBytes / 2

// segmentEndSnapshot is the producer state as of seg's end, which hotlog
// wrote when it rolled to the next segment (base seg.NextOffset), for the
// object's producer-snapshot section; nil (logged) when there is none or
// it is too large. A follower restarting at seg.NextOffset installs it.
func (b *Broker) segmentEndSnapshot(p *partition, seg hotlog.SegmentInfo) []byte {
	snap, ok := p.log.ProducerSnapshotAt(seg.NextOffset)
	if !ok || len(snap) > maxTieredSnapshotBytes {
		b.log.Warn("tiered segment carries no producer state", "topic", p.topic, "partition", p.index,
			"end_offset", seg.NextOffset, "found", ok, "bytes", len(snap))
		return nil
	}
	return snap
}

// attemptKey returns the key for an upload of the segment at base: the
// previous failed attempt's key when it was for the same segment and epoch
// (see uploadState.retryKey), else a fresh one, remembered for a retry.
func (b *Broker) attemptKey(p *partition, base int64, parts tier.SegmentKeyParts) (string, error) {
	t := &b.tiering
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.parts[tp(p)]
	if st != nil && st.retryKey != "" && st.retryBase == base {
		if old, err := tier.ParseSegmentKey(st.retryKey); err == nil && old.Epoch == parts.Epoch {
			return st.retryKey, nil
		}
	}
	key, err := tier.SegmentKey(parts)
	if err == nil && st != nil {
		st.retryKey, st.retryBase = key, base
	}
	return key, err
}

// forgetAttempt clears the retry key once its segment is committed.
func (b *Broker) forgetAttempt(p *partition) {
	b.tiering.mu.Lock()
	defer b.tiering.mu.Unlock()
	if st := b.tiering.parts[tp(p)]; st != nil {
		st.retryKey = ""
	}
}

// entryFor builds the manifest entry of an uploaded object.
func entryFor(p *partition, obj *tier.EncodedObject, key string) metadata.TierEntry {
	f := obj.Footer()
	epoch := f.UploadEpoch
	if n := len(obj.Index.Epochs); n > 0 {
		epoch = obj.Index.Epochs[n-1].Epoch
	}
	return metadata.TierEntry{TopicID: p.topicID, Partition: p.index, BaseOffset: f.BaseOffset,
		LastOffset: f.LastOffset, FirstTimestamp: f.FirstTimestamp, MaxTimestamp: f.MaxTimestamp,
		LeaderEpoch: epoch, Key: key, Size: f.ObjectSize()}
}

// commitSegment commits e with a create-if-absent CAS. If an entry for the
// same base already exists (an earlier attempt committed but its answer
// was lost), that entry wins when it covers the same offsets: our object is
// then an orphan and is deleted at once.
func (b *Broker) commitSegment(ctx context.Context, p *partition, e metadata.TierEntry) error {
	rev, err := b.store.CommitTierEntryRev(ctx, e)
	if errors.Is(err, metadata.ErrTierEntryExists) {
		return b.adoptExisting(ctx, p, e)
	}
	if err != nil {
		return fmt.Errorf("commit %s: %w", e.Key, err)
	}
	e.Version = rev
	p.manifest.Committed(e)
	b.forgetAttempt(p)
	b.tiering.mu.Lock()
	b.tiering.counters.SegmentsUploaded++
	b.tiering.counters.BytesUploaded += e.Size
	b.tiering.mu.Unlock()
	b.log.Debug("tiered segment", "topic", p.topic, "partition", p.index, "base", e.BaseOffset,
		"last", e.LastOffset, "key", e.Key, "bytes", e.Size)
	return nil
}

// adoptExisting handles ErrTierEntryExists for e: the committed entry is
// loaded into the manifest if it matches e's offsets; e's object is deleted.
func (b *Broker) adoptExisting(ctx context.Context, p *partition, e metadata.TierEntry) error {
	entries, err := b.store.TierEntries(ctx, p.topicID, p.index)
	if err != nil {
		return err
	}
	for _, old := range entries {
		if old.BaseOffset != e.BaseOffset {
			continue
		}
		if old.LastOffset != e.LastOffset {
			return fmt.Errorf("%w: committed entry %s ends at %d, segment at %d",
				metadata.ErrTierEntryExists, old.Key, old.LastOffset, e.LastOffset)
		}
		p.manifest.Committed(old)
		b.forgetAttempt(p)
		if old.Key == e.Key {
			return nil
		}
		if err := b.objects.Delete(ctx, e.Key); err != nil {
			b.log.Warn("deleting duplicate upload; the sweeper will", "key", e.Key, "err", err)
		}
		return nil
	}
	return fmt.Errorf("%w: entry at %d vanished", metadata.ErrTierEntryExists, e.BaseOffset)
}

// updateUploadLag recomputes p's bytes of sealed segments not yet tiered.
func (b *Broker) updateUploadLag(p *partition) {
	covered, _ := p.manifest.ContiguousEnd(p.topicID, p.index)
	var lag int64
	for _, s := range p.log.SealedSegments() {
		if s.NextOffset > covered {
			lag += s.Size
		}
	}
	p.uploadLag.Store(lag)
}

// ensureTopicFile writes <topic dir>/topic.json when this broker has not
// written the topic's current configs yet (first upload, config change).
func (b *Broker) ensureTopicFile(ctx context.Context, p *partition) error {
	view, ok := b.parts.topicByID(p.topicID)
	if !ok {
		return fmt.Errorf("%w: topic %s gone", errUnknownTopic, p.topic)
	}
	body, err := tier.EncodeTopicFile(tier.TopicFile{Topic: view.topic.Name, TopicID: view.topic.ID.String(),
		Partitions: int32(len(view.topic.Replicas)), Configs: view.topic.Configs})
	if err != nil {
		return err
	}
	b.tiering.mu.Lock()
	same := b.tiering.topicFiles[p.topicID] == string(body)
	b.tiering.mu.Unlock()
	if same {
		return nil
	}
	key := tier.TopicConfigKey(b.store.Cluster(), view.topic.Name, view.topic.ID)
	if err := b.objects.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	b.tiering.mu.Lock()
	b.tiering.topicFiles[p.topicID] = string(body)
	b.tiering.mu.Unlock()
	return nil
}
