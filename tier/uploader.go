package tier

// The uploader: every UploadInterval (or at once when an upload finishes)
// each led, tiered partition's sealed segments wholly below its high
// watermark and last stable offset are encoded as objects, put, verified
// and committed to the manifest in offset order. Only then may local
// retention delete them (retention.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// kickUploader wakes the uploader early; never blocks.
func (s *Service) kickUploader() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// UploadRound refreshes the upload lag of every led partition with
// tiering on, rolls the active segments that tier.upload.max.lag.ms says
// are due (bound.go), and starts an upload of its pending segments where
// none runs, at most UploadConcurrency at a time. It does not wait for the
// uploads: one hanging on an unreachable bucket must not stop the lag (and
// so the throttling) of the others from being updated.
func (s *Service) UploadRound(ctx context.Context) {
	for _, p := range s.reg.LocalPartitions() {
		if !p.Leads() || !p.Tiered() || p.Config().RemoteLogCopyDisable {
			continue
		}
		s.rollForUploadBound(p, time.Now())
		s.updateUploadLag(p)
		if len(s.PendingSegments(p)) == 0 || !s.claimUpload(p) {
			continue
		}
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			err := s.UploadPartition(ctx, p)
			s.releaseUpload(p, err)
		}()
	}
}

// claimUpload marks p busy and takes an upload slot, unless p is uploading
// or backing off, or every slot is taken.
func (s *Service) claimUpload(p Partition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := p.Key()
	st := s.parts[key]
	if st == nil {
		st = &uploadState{}
		s.parts[key] = st
	}
	if st.busy || time.Now().Before(st.notBefore) {
		return false
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return false
	}
	st.busy = true
	return true
}

// releaseUpload records the outcome: a failure backs the partition off
// exponentially (RetryBackoff doubling up to MaxRetryBackoff).
func (s *Service) releaseUpload(p Partition, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.parts[p.Key()]
	st.busy = false
	<-s.slots
	s.kickUploader() // a slot is free: other partitions need not wait a whole interval
	if err == nil || errors.Is(err, context.Canceled) {
		st.failures, st.lastErr, st.notBefore = 0, "", time.Time{}
		return
	}
	st.failures++
	s.counters.UploadFailures++
	wait := s.cfg.RetryBackoff << min(st.failures-1, 16)
	wait = min(wait, s.cfg.MaxRetryBackoff)
	st.notBefore, st.lastErr = time.Now().Add(wait), err.Error()
	if st.failures == 1 || st.failures%10 == 0 {
		s.log.Warn("tier upload failed; retrying", "topic", p.Topic(), "partition", p.Key().Partition,
			"failures", st.failures, "retry_in", wait, "err", err)
	}
}

// UploadPartition uploads p's pending segments in offset order, stopping
// at the first failure so the manifest never gets a gap.
func (s *Service) UploadPartition(ctx context.Context, p Partition) error {
	defer s.updateUploadLag(p)
	for _, seg := range s.PendingSegments(p) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.uploadSegment(ctx, p, seg); err != nil {
			return fmt.Errorf("segment %d: %w", seg.BaseOffset, err)
		}
		s.updateUploadLag(p)
	}
	return nil
}

// PendingSegments lists p's sealed, non-empty segments wholly below the HW
// that the manifest does not cover yet and that are not wholly deleted
// (below the log start).
func (s *Service) PendingSegments(p Partition) []hotlog.SegmentInfo {
	hw := min(p.HighWatermark(), p.LastStableOffset())
	k := p.Key()
	covered, _ := s.manifest.ContiguousEnd(k.TopicID, k.Partition)
	start := s.logStart(p)
	var out []hotlog.SegmentInfo
	for _, seg := range p.Log().SealedSegments() {
		if seg.Size == 0 || seg.NextOffset <= covered || seg.NextOffset <= start {
			continue
		}
		if seg.NextOffset > hw {
			break
		}
		out = append(out, seg)
	}
	return out
}

// uploadSegment writes one segment object, verifies it, commits its
// manifest entry and records it locally. Only after this may local
// retention delete the segment.
func (s *Service) uploadSegment(ctx context.Context, p Partition, seg hotlog.SegmentInfo) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.UploadTimeout)
	defer cancel()
	if err := s.ensureTopicFile(ctx, p); err != nil {
		return err
	}
	f, size, err := p.Log().OpenSealedSegment(seg.BaseOffset)
	if err != nil {
		return err
	}
	defer f.Close()
	part, err := s.uncoveredPart(p, seg, f, size)
	if err != nil {
		return err
	}
	k, epoch := p.Key(), max(p.LeaderEpoch(), 0)
	obj, err := EncodeSegmentObject(part.log, part.size, SegmentMeta{
		Topic: p.Topic(), TopicID: k.TopicID, Partition: k.Partition, UploadEpoch: epoch,
		ProducerSnapshot: s.segmentEndSnapshot(p, seg), AbortedTxns: part.aborted})
	if err != nil {
		return err
	}
	key, err := s.attemptKey(p, part.from, SegmentKeyParts{Cluster: s.store.Cluster(), Topic: p.Topic(),
		TopicID: k.TopicID, Partition: k.Partition, BaseOffset: obj.Footer().BaseOffset, Epoch: epoch})
	if err != nil {
		return err
	}
	if err := s.objects.Put(ctx, key, obj.NewReader(), obj.Size()); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := Verify(ctx, s.objects, key, obj.Footer(), false); err != nil {
		return fmt.Errorf("verify %s: %w", key, err)
	}
	return s.CommitSegment(ctx, p, EntryFor(k, obj, key))
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
func (s *Service) uncoveredPart(p Partition, seg hotlog.SegmentInfo, f io.ReaderAt, size int64) (segmentPart, error) {
	k := p.Key()
	covered, _ := s.manifest.ContiguousEnd(k.TopicID, k.Partition)
	if covered <= seg.BaseOffset {
		return segmentPart{log: f, size: size, from: seg.BaseOffset, aborted: seg.AbortedTxns}, nil
	}
	pos, err := p.Log().SealedPosition(seg.BaseOffset, covered)
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
// object's index budget (MaxIndexSectionBytes for all index sections).
const maxTieredSnapshotBytes = MaxIndexSectionBytes / 2

// segmentEndSnapshot is the producer state as of seg's end, which hotlog
// wrote when it rolled to the next segment (base seg.NextOffset), for the
// object's producer-snapshot section; nil (logged) when there is none or
// it is too large. A follower restarting at seg.NextOffset installs it.
func (s *Service) segmentEndSnapshot(p Partition, seg hotlog.SegmentInfo) []byte {
	snap, ok := p.Log().ProducerSnapshotAt(seg.NextOffset)
	if !ok || len(snap) > maxTieredSnapshotBytes {
		s.log.Warn("tiered segment carries no producer state", "topic", p.Topic(), "partition", p.Key().Partition,
			"end_offset", seg.NextOffset, "found", ok, "bytes", len(snap))
		return nil
	}
	return snap
}

// attemptKey returns the key for an upload of the segment at base: the
// previous failed attempt's key when it was for the same segment and epoch
// (see uploadState.retryKey), else a fresh one, remembered for a retry.
func (s *Service) attemptKey(p Partition, base int64, parts SegmentKeyParts) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.parts[p.Key()]
	if st != nil && st.retryKey != "" && st.retryBase == base {
		if old, err := ParseSegmentKey(st.retryKey); err == nil && old.Epoch == parts.Epoch {
			return st.retryKey, nil
		}
	}
	key, err := SegmentKey(parts)
	if err == nil && st != nil {
		st.retryKey, st.retryBase = key, base
	}
	return key, err
}

// forgetAttempt clears the retry key once its segment is committed.
func (s *Service) forgetAttempt(p Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.parts[p.Key()]; st != nil {
		st.retryKey = ""
	}
}

// EntryFor builds the manifest entry of an uploaded object.
func EntryFor(k metadata.TierPartition, obj *EncodedObject, key string) metadata.TierEntry {
	f := obj.Footer()
	epoch := f.UploadEpoch
	if n := len(obj.Index.Epochs); n > 0 {
		epoch = obj.Index.Epochs[n-1].Epoch
	}
	return metadata.TierEntry{TopicID: k.TopicID, Partition: k.Partition, BaseOffset: f.BaseOffset,
		LastOffset: f.LastOffset, FirstTimestamp: f.FirstTimestamp, MaxTimestamp: f.MaxTimestamp,
		LeaderEpoch: epoch, Key: key, Size: f.ObjectSize()}
}

// CommitSegment commits e with a create-if-absent CAS. If an entry for the
// same base already exists (an earlier attempt committed but its answer
// was lost), that entry wins when it covers the same offsets: our object is
// then an orphan and is deleted at once.
func (s *Service) CommitSegment(ctx context.Context, p Partition, e metadata.TierEntry) error {
	rev, err := s.store.CommitTierEntryRev(ctx, e)
	if errors.Is(err, metadata.ErrTierEntryExists) {
		return s.adoptExisting(ctx, p, e)
	}
	if err != nil {
		return fmt.Errorf("commit %s: %w", e.Key, err)
	}
	e.Version = rev
	s.manifest.Committed(e)
	s.forgetAttempt(p)
	s.count(func(c *Counters) {
		c.SegmentsUploaded++
		c.BytesUploaded += e.Size
	})
	s.log.Debug("tiered segment", "topic", p.Topic(), "partition", e.Partition, "base", e.BaseOffset,
		"last", e.LastOffset, "key", e.Key, "bytes", e.Size)
	return nil
}

// adoptExisting handles ErrTierEntryExists for e: the committed entry is
// loaded into the manifest if it matches e's offsets; e's object is deleted.
func (s *Service) adoptExisting(ctx context.Context, p Partition, e metadata.TierEntry) error {
	entries, err := s.store.TierEntries(ctx, e.TopicID, e.Partition)
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
		s.manifest.Committed(old)
		s.forgetAttempt(p)
		if old.Key == e.Key {
			return nil
		}
		if err := s.objects.Delete(ctx, e.Key); err != nil {
			s.log.Warn("deleting duplicate upload; the sweeper will", "key", e.Key, "err", err)
		}
		return nil
	}
	return fmt.Errorf("%w: entry at %d vanished", metadata.ErrTierEntryExists, e.BaseOffset)
}

// updateUploadLag recomputes p's bytes of sealed segments not yet tiered.
func (s *Service) updateUploadLag(p Partition) {
	k := p.Key()
	covered, _ := s.manifest.ContiguousEnd(k.TopicID, k.Partition)
	var lag int64
	for _, seg := range p.Log().SealedSegments() {
		if seg.NextOffset > covered {
			lag += seg.Size
		}
	}
	p.UploadLag().Store(lag)
}

// errTopicGone: the partition's topic left the registry mid-upload.
var errTopicGone = errors.New("tier: topic gone")

// ensureTopicFile writes <topic dir>/topic.json when this broker has not
// written the topic's current configs yet (first upload, config change).
func (s *Service) ensureTopicFile(ctx context.Context, p Partition) error {
	k := p.Key()
	topic, ok := s.reg.TopicByID(k.TopicID)
	if !ok {
		return fmt.Errorf("%w: %s", errTopicGone, p.Topic())
	}
	body, err := EncodeTopicFile(TopicFile{Topic: topic.Name, TopicID: topic.ID.String(),
		Partitions: int32(len(topic.Replicas)), Configs: topic.Configs})
	if err != nil {
		return err
	}
	s.mu.Lock()
	same := s.topicFiles[k.TopicID] == string(body)
	s.mu.Unlock()
	if same {
		return nil
	}
	key := TopicConfigKey(s.store.Cluster(), topic.Name, topic.ID)
	if err := s.objects.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	s.mu.Lock()
	s.topicFiles[k.TopicID] = string(body)
	s.mu.Unlock()
	return nil
}
