package broker

import (
	"context"
	"strings"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// sweepOrphans deletes segment objects of this cluster that no manifest
// entry names (an upload that crashed before its commit, a duplicate
// upload, a deleted topic's objects) and topic.json files of deleted
// topics, once they are older than OrphanGrace. Before deleting a segment
// object it re-reads the partition's entries from etcd, so a lagging
// in-memory manifest never costs a live object, and it deletes objects only
// of topic ids etcd has live or recorded as deleted: an id etcd does not
// know is a lost index that `strata restore` can rebuild
// (tiering_restore_safety.go). With several brokers (issue 5) only the
// controller sweeps.
func (b *Broker) sweepOrphans(ctx context.Context, now time.Time) {
	if b.objects == nil {
		return
	}
	objs, err := b.objects.List(ctx, b.store.Cluster()+"/topics/")
	if err != nil {
		b.log.Warn("orphan sweep: listing the bucket", "err", err)
		return
	}
	live := b.manifest.Keys()
	b.tiering.mu.Lock()
	for _, d := range b.tiering.pendingDeletes {
		live[d.key] = struct{}{} // retention deletes it soon
	}
	b.tiering.mu.Unlock()
	if b.compactor != nil {
		for key := range b.compactor.PendingDeletes() {
			live[key] = struct{}{} // replaced by tiered cleaning; deleted after its grace
		}
	}
	run := newSweepRun()
	for _, o := range objs {
		if _, ok := live[o.Key]; ok || now.Sub(o.ModTime) < b.cfg.Tier.OrphanGrace || ctx.Err() != nil {
			continue
		}
		if b.isOrphan(ctx, o.Key, run) {
			b.deleteOrphan(ctx, o.Key)
		}
	}
}

// isOrphan decides about one old object absent from the in-memory manifest.
func (b *Broker) isOrphan(ctx context.Context, key string, run *sweepRun) bool {
	if strings.HasSuffix(key, "/topic.json") {
		return b.topicFileOrphan(ctx, key, run)
	}
	parts, err := tier.ParseSegmentKey(key)
	if err != nil || parts.Cluster != b.store.Cluster() {
		return false // not ours to judge
	}
	switch id := b.topicIDStatus(ctx, run, parts.TopicID, key); {
	case id.err != nil || (!id.live && !id.deleted):
		return false // unknown to etcd: restorable, kept
	case id.deleted && !id.live:
		return true // its manifest went with it
	}
	tpKey := metadata.TierPartition{TopicID: parts.TopicID, Partition: parts.Partition}
	keys, ok := run.confirmed[tpKey]
	if !ok {
		entries, err := b.store.TierEntries(ctx, parts.TopicID, parts.Partition)
		if err != nil {
			b.log.Warn("orphan sweep: reading manifest", "key", key, "err", err)
			return false
		}
		keys = map[string]bool{}
		for _, e := range entries {
			keys[e.Key] = true
		}
		run.confirmed[tpKey] = keys
	}
	return !keys[key]
}

// topicFileOrphan: a topic.json whose topic id etcd records as deleted.
func (b *Broker) topicFileOrphan(ctx context.Context, key string, run *sweepRun) bool {
	dir := strings.TrimSuffix(key, "/topic.json")
	element := dir[strings.LastIndexByte(dir, '/')+1:]
	const idLen = 22
	if len(element) < idLen+2 {
		return false
	}
	id, err := metadata.ParseTopicID(element[len(element)-idLen:])
	if err != nil {
		return false
	}
	if _, known := b.parts.topicByID(id); known {
		return false
	}
	st := b.topicIDStatus(ctx, run, id, key)
	return st.err == nil && st.deleted && !st.live
}

func (b *Broker) deleteOrphan(ctx context.Context, key string) {
	if err := b.objects.Delete(ctx, key); err != nil {
		b.log.Warn("orphan sweep: delete", "key", key, "err", err)
		return
	}
	b.tiering.mu.Lock()
	b.tiering.counters.OrphansDeleted++
	b.tiering.mu.Unlock()
	b.log.Info("orphan sweep: deleted object absent from the manifest", "key", key)
}

// PartitionTierStatus is one partition's view across both tiers
// (`strata tier status`).
type PartitionTierStatus struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LogStartOffset int64  `json:"logStartOffset"` // across both tiers
	LocalStart     int64  `json:"localStart"`     // hot log [LocalStart, LocalEnd)
	LocalEnd       int64  `json:"localEnd"`
	LocalBytes     int64  `json:"localBytes"`
	LocalSegments  int    `json:"localSegments"`
	Tiered         bool   `json:"tiered"` // TieredStart/End are meaningful
	TieredStart    int64  `json:"tieredStart"`
	TieredEnd      int64  `json:"tieredEnd"`
	Objects        int    `json:"objects"`
	TieredBytes    int64  `json:"tieredBytes"`
	UploadLagBytes int64  `json:"uploadLagBytes"`
	// Leader: this broker leads the partition; only a leader uploads, so
	// the bucket lag below is known only there (zero elsewhere).
	Leader bool `json:"leader"`
	// BucketEnd is where the bucket's contiguous history ends (exclusive).
	// BucketLagMs is the age of the oldest committed, stable record not in
	// the bucket (0: the bucket holds everything below the high watermark
	// and the last stable offset), BucketLagBytes the local bytes from it
	// on, and UploadMaxLagMs the partition's bound (-1: none).
	BucketEnd      int64  `json:"bucketEnd"`
	BucketLagMs    int64  `json:"bucketLagMs"`
	BucketLagBytes int64  `json:"bucketLagBytes"`
	UploadMaxLagMs int64  `json:"uploadMaxLagMs"`
	LastError      string `json:"lastError,omitempty"`
	// Compaction (cleanup.policy has compact): the cleaned ranges are
	// [LocalStart, CleanedLocalEnd) on disk and [TieredStart,
	// CleanedTieredEnd) in the bucket (the latter known to the leader
	// since it last took over).
	Compacted        bool    `json:"compacted"`
	CleanedLocalEnd  int64   `json:"cleanedLocalEnd"`
	CleanedTieredEnd int64   `json:"cleanedTieredEnd"`
	DirtyRatio       float64 `json:"dirtyRatio"`
	DirtyBytes       int64   `json:"dirtyBytes"`
	CleanerPasses    int64   `json:"cleanerPasses"`
	CleanedBytesIn   int64   `json:"cleanedBytesIn"`
	CleanedBytesOut  int64   `json:"cleanedBytesOut"`
}

// TierStatus describes every local partition (of topic, if not empty),
// sorted by topic and partition.
func (b *Broker) TierStatus(topic string) []PartitionTierStatus {
	var out []PartitionTierStatus
	for _, t := range b.parts.allTopics() {
		if topic != "" && t.topic.Name != topic {
			continue
		}
		for i := range t.topic.Replicas {
			p, code := b.lookupPartition(t.topic.Name, int32(i))
			if code != 0 {
				continue
			}
			out = append(out, b.partitionTierStatus(p))
		}
	}
	return out
}

func (b *Broker) partitionTierStatus(p *partition) PartitionTierStatus {
	st := PartitionTierStatus{Topic: p.topic, Partition: p.index, LogStartOffset: p.logStartOffset(),
		LocalStart: p.log.LogStartOffset(), LocalEnd: p.log.LogEndOffset(), LocalBytes: p.log.Size(),
		LocalSegments: len(p.log.SealedSegments()) + 1, UploadLagBytes: p.uploadLag.Load()}
	entries := p.manifest.Segments(p.topicID, p.index)
	if n := len(entries); n > 0 {
		st.Tiered, st.TieredStart, st.TieredEnd = true, entries[0].BaseOffset, entries[n-1].LastOffset+1
		st.Objects = n
		for _, e := range entries {
			st.TieredBytes += e.Size
		}
	}
	b.addBucketLag(p, &st)
	b.tiering.mu.Lock()
	if us := b.tiering.parts[tp(p)]; us != nil {
		st.LastError = us.lastErr
	}
	b.tiering.mu.Unlock()
	if p.config().HasCompact() {
		b.addCleanerStatus(p, &st)
	}
	return st
}

// addBucketLag fills the bucket-lag fields of st where this broker leads a
// tiered partition.
func (b *Broker) addBucketLag(p *partition, st *PartitionTierStatus) {
	if p.leader() != b.cfg.NodeID || !b.tieringEnabled(p.topic, p.config()) {
		return
	}
	st.Leader = true
	st.BucketEnd, _ = p.manifest.ContiguousEnd(p.topicID, p.index)
	lag, bytes := bucketLag(p, time.Now())
	st.BucketLagMs, st.BucketLagBytes = lag.Milliseconds(), bytes
	st.UploadMaxLagMs = -1
	if bound, ok := b.uploadMaxLag(p.config()); ok {
		st.UploadMaxLagMs = bound.Milliseconds()
	}
}

// addCleanerStatus fills the compaction fields of st.
func (b *Broker) addCleanerStatus(p *partition, st *PartitionTierStatus) {
	view := cleanerView{b, p}
	clean, dirty := p.log.CleanableBytes(b.cleaner.FirstUncleanable(view, time.Now()))
	if st.Tiered {
		tclean, tdirty := b.cleaner.TierCleanableBytes(view)
		clean, dirty = clean+tclean, dirty+tdirty
		st.CleanedTieredEnd = max(min(p.cleaned.TierCheckpoint(), st.TieredEnd), st.TieredStart)
	}
	st.Compacted, st.CleanedLocalEnd, st.DirtyBytes = true, p.log.CleanerCheckpoint(), dirty
	if clean+dirty > 0 {
		st.DirtyRatio = float64(dirty) / float64(clean+dirty)
	}
	totals := p.cleaned.Totals()
	st.CleanerPasses, st.CleanedBytesIn, st.CleanedBytesOut = totals.Passes, totals.BytesIn, totals.BytesOut
}

// TierManifestView is the broker's tier manifest as `strata tier verify`
// checks it against the bucket.
type TierManifestView struct {
	Cluster string              `json:"cluster"`
	Entries []TierManifestEntry `json:"entries"`
	// PendingDeletes are objects no longer in the manifest that are deleted
	// after a delay (remote retention, tiered cleaning): not orphans.
	PendingDeletes []string `json:"pendingDeletes"`
	// LiveTopicIDs are the topic ids this cluster has: objects of other
	// ids belong to incarnations etcd does not know (kept, not orphans;
	// `strata restore` can index them).
	LiveTopicIDs []string `json:"liveTopicIds"`
}

// TierManifestEntry is one manifest entry.
type TierManifestEntry struct {
	TopicID    string `json:"topicId"`
	Partition  int32  `json:"partition"`
	BaseOffset int64  `json:"baseOffset"`
	LastOffset int64  `json:"lastOffset"`
	Key        string `json:"key"`
	Size       int64  `json:"size"`
}

// TierManifest returns the in-memory manifest and the objects awaiting
// deletion.
func (b *Broker) TierManifest() TierManifestView {
	v := TierManifestView{Cluster: b.store.Cluster(), Entries: []TierManifestEntry{}, PendingDeletes: []string{}}
	for _, t := range b.parts.allTopics() {
		v.LiveTopicIDs = append(v.LiveTopicIDs, t.topic.ID.String())
	}
	for _, e := range b.manifest.All() {
		v.Entries = append(v.Entries, TierManifestEntry{TopicID: e.TopicID.String(), Partition: e.Partition,
			BaseOffset: e.BaseOffset, LastOffset: e.LastOffset, Key: e.Key, Size: e.Size})
	}
	b.tiering.mu.Lock()
	for _, d := range b.tiering.pendingDeletes {
		v.PendingDeletes = append(v.PendingDeletes, d.key)
	}
	b.tiering.mu.Unlock()
	if b.compactor != nil {
		for key := range b.compactor.PendingDeletes() {
			v.PendingDeletes = append(v.PendingDeletes, key)
		}
	}
	return v
}
