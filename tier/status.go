package tier

// What `strata tier status` and `strata tier verify` read: a partition's
// view across both tiers, and the manifest with the objects awaiting
// deletion.

import (
	"time"

	"github.com/strata-log/strata/metadata"
)

// PartitionStatus is one partition's view across both tiers
// (`strata tier status`).
type PartitionStatus struct {
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
	// Leader: this broker leads the partition. Only a leader uploads, so
	// the bucket lag below is known only on the leader of a partition of a
	// tiered topic (zero elsewhere).
	Leader bool `json:"leader"`
	// RemoteStorage: the partition's topic is tiered (remote.storage.enable).
	RemoteStorage bool `json:"remoteStorage"`
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
	// Held is what the retention hold keeps in the bucket past retention
	// for consumer groups (hold.go), as of the leader's last retention
	// pass; zero on followers.
	Held HeldStatus `json:"held"`
	// Compaction (cleanup.policy has compact): the cleaned ranges are
	// [LocalStart, CleanedLocalEnd) on disk and [TieredStart,
	// CleanedTieredEnd) in the bucket (the latter known to the leader
	// since it last took over). The cleaner fills these.
	Compacted        bool    `json:"compacted"`
	CleanedLocalEnd  int64   `json:"cleanedLocalEnd"`
	CleanedTieredEnd int64   `json:"cleanedTieredEnd"`
	DirtyRatio       float64 `json:"dirtyRatio"`
	DirtyBytes       int64   `json:"dirtyBytes"`
	CleanerPasses    int64   `json:"cleanerPasses"`
	CleanedBytesIn   int64   `json:"cleanedBytesIn"`
	CleanedBytesOut  int64   `json:"cleanedBytesOut"`
	// Uncleanable: a local pass failed for good and the cleaner skips the
	// partition until the broker restarts (the log says why).
	Uncleanable bool `json:"uncleanable,omitempty"`
}

// Status is p's view across both tiers, without the compaction fields.
func (s *Service) Status(p Partition) PartitionStatus {
	k, log := p.Key(), p.Log()
	st := PartitionStatus{Topic: p.Topic(), Partition: k.Partition, LogStartOffset: s.logStart(p),
		LocalStart: log.LogStartOffset(), LocalEnd: log.LogEndOffset(), LocalBytes: log.Size(),
		LocalSegments: len(log.SealedSegments()) + 1, UploadLagBytes: p.UploadLag().Load(),
		Leader: p.Leads(), RemoteStorage: p.Tiered()}
	entries := s.manifest.Segments(k.TopicID, k.Partition)
	if n := len(entries); n > 0 {
		st.Tiered, st.TieredStart, st.TieredEnd = true, entries[0].BaseOffset, entries[n-1].LastOffset+1
		st.Objects = n
		for _, e := range entries {
			st.TieredBytes += e.Size
		}
	}
	s.addBucketLag(p, &st)
	s.mu.Lock()
	if us := s.parts[k]; us != nil {
		st.LastError = us.lastErr
	}
	if p.Leads() {
		st.Held = s.held[k]
	}
	s.mu.Unlock()
	return st
}

// addBucketLag fills the bucket-lag fields of st where this broker leads a
// tiered partition.
func (s *Service) addBucketLag(p Partition, st *PartitionStatus) {
	if !p.Leads() || !p.Tiered() {
		return
	}
	k := p.Key()
	st.BucketEnd, _ = s.manifest.ContiguousEnd(k.TopicID, k.Partition)
	lag, bytes := s.bucketLag(p, time.Now())
	st.BucketLagMs, st.BucketLagBytes = lag.Milliseconds(), bytes
	st.UploadMaxLagMs = -1
	if bound, ok := s.cfg.UploadMaxLagOf(p.Config()); ok {
		st.UploadMaxLagMs = bound.Milliseconds()
	}
}

// ManifestView is the broker's tier manifest as `strata tier verify`
// checks it against the bucket.
type ManifestView struct {
	Cluster string          `json:"cluster"`
	Entries []ManifestEntry `json:"entries"`
	// PendingDeletes are objects no longer in the manifest that are deleted
	// after a delay (remote retention, tiered cleaning): not orphans.
	PendingDeletes []string `json:"pendingDeletes"`
	// LiveTopicIDs are the topic ids this cluster has: objects of other
	// ids belong to incarnations etcd does not know (kept, not orphans;
	// `strata restore` can index them).
	LiveTopicIDs []string `json:"liveTopicIds"`
}

// ManifestEntry is one manifest entry.
type ManifestEntry struct {
	TopicID    string `json:"topicId"`
	Partition  int32  `json:"partition"`
	BaseOffset int64  `json:"baseOffset"`
	LastOffset int64  `json:"lastOffset"`
	Key        string `json:"key"`
	Size       int64  `json:"size"`
}

// ManifestView returns the in-memory manifest and the objects awaiting
// deletion.
func (s *Service) ManifestView() ManifestView {
	v := ManifestView{Cluster: s.store.Cluster(), Entries: []ManifestEntry{}, PendingDeletes: []string{}}
	for _, t := range s.reg.Topics() {
		v.LiveTopicIDs = append(v.LiveTopicIDs, t.ID.String())
	}
	for _, e := range s.manifest.All() {
		v.Entries = append(v.Entries, ManifestEntry{TopicID: e.TopicID.String(), Partition: e.Partition,
			BaseOffset: e.BaseOffset, LastOffset: e.LastOffset, Key: e.Key, Size: e.Size})
	}
	v.PendingDeletes = append(v.PendingDeletes, s.PendingDeletes()...)
	return v
}

// RestartOffset is where a replica about to lead must restart its log:
// the end of the manifest's gap-free run (or the tiered log start, when
// above it), if its local log ends below that; false if it need not. A
// replica that leads while its local log ends below the tiered end (an
// empty disk after a restore or a disk loss) restarts there first, so its
// first new record gets the next offset after the bucket's and never
// reuses a tiered offset.
func (m *Manifest) RestartOffset(k metadata.TierPartition, logEnd int64) (int64, bool) {
	target := m.LogStart(k.TopicID, k.Partition)
	if end, ok := m.ContiguousEnd(k.TopicID, k.Partition); ok {
		target = max(target, end)
	}
	return target, logEnd < target
}
