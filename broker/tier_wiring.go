package broker

// Wiring of the tiering service (package tier): the broker builds one
// tier.Service and one tier.ColdReader, starts and stops them with its
// lifecycle, and lends them its partitions through the thin adapters
// below. What tiering does lives in package tier; this file only says
// which broker state answers the service's questions.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// The tiering types the broker's API exposes (cmd reads them).
type (
	// TierConfig configures tiering on this broker (tier.Config).
	TierConfig = tier.Config
	// TierCounters are the tiering counters (tier.Counters).
	TierCounters = tier.Counters
	// PartitionTierStatus is one partition's view across both tiers.
	PartitionTierStatus = tier.PartitionStatus
	// TierManifestView is the manifest as `strata tier verify` reads it.
	TierManifestView = tier.ManifestView
	// TierManifestEntry is one entry of a TierManifestView.
	TierManifestEntry = tier.ManifestEntry
)

// errUploadLag is Produce's throttling error (batches.go maps it).
var errUploadLag = tier.ErrUploadLag

// coldObject is the cleaner's and the follower's name for tier's helper.
var coldObject = tier.ColdObjectOf

// newTierService builds the tiering service over this broker's state.
func (b *Broker) newTierService() *tier.Service {
	cfg := b.cfg.Tier
	// A group's hold counts while the coordinator keeps its offsets (the
	// same window the coordinators publish holds for, lag_wiring.go).
	cfg.HoldActiveWindow = b.cfg.Group.WithDefaults().OffsetsRetention
	return tier.NewService(tier.Deps{Config: cfg, Objects: b.objects, Manifest: b.manifest,
		Compactor: b.compactor, Store: b.store, Registry: tierRegistry{b}, Cleaning: tierCleaning{b},
		Logger: b.componentLog("tier")})
}

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

// tp names p in the manifest.
func tp(p *partition) metadata.TierPartition {
	return metadata.TierPartition{TopicID: p.topicID, Partition: p.index}
}

// logStartOffset is Kafka's log start offset across both tiers
// (tier.Manifest.LogStartAcrossTiers). Equals log.LogStartOffset() when
// nothing is tiered.
func (p *partition) logStartOffset() int64 {
	return p.manifest.LogStartAcrossTiers(tp(p), p.log.LogStartOffset())
}

// localLogStartOffset is the first offset the hot log still holds.
func (p *partition) localLogStartOffset() int64 { return p.log.LogStartOffset() }

// tieredRange is the partition's range in the bucket, [start, end); ok is
// false when nothing is tiered.
func (p *partition) tieredRange() (start, end int64, ok bool) {
	return p.manifest.Range(p.topicID, p.index)
}

// tierPartition is a local partition as the tiering service sees it.
type tierPartition struct {
	p *partition
	b *Broker
}

var _ tier.Partition = tierPartition{}

func (t tierPartition) Key() metadata.TierPartition  { return tp(t.p) }
func (t tierPartition) Topic() string                { return t.p.topic }
func (t tierPartition) Log() *hotlog.Log             { return t.p.log }
func (t tierPartition) Config() metadata.TopicConfig { return t.p.config() }
func (t tierPartition) Tiered() bool                 { return t.b.tieringEnabled(t.p.topic, t.p.config()) }
func (t tierPartition) KeepsLocalLog() bool          { return keepsLocalLog(t.p.topic) }
func (t tierPartition) Leads() bool                  { return t.p.leader() == t.b.cfg.NodeID }
func (t tierPartition) LeaderEpoch() int32           { return t.p.leaderEpoch() }
func (t tierPartition) HighWatermark() int64         { return t.p.highWatermark() }
func (t tierPartition) LastStableOffset() int64      { return t.p.lastStableOffset() }
func (t tierPartition) UploadLag() *atomic.Int64     { return &t.p.uploadLag }

// tierRegistry is the partition registry as the tiering service reads it.
type tierRegistry struct{ b *Broker }

func (r tierRegistry) LocalPartitions() []tier.Partition {
	local := r.b.parts.localPartitions()
	out := make([]tier.Partition, len(local))
	for i, p := range local {
		out[i] = tierPartition{p, r.b}
	}
	return out
}

func (r tierRegistry) TopicByID(id metadata.TopicID) (metadata.Topic, bool) {
	view, ok := r.b.parts.topicByID(id)
	return view.topic, ok
}

func (r tierRegistry) Topics() []metadata.Topic {
	var out []metadata.Topic
	for _, t := range r.b.parts.allTopics() {
		out = append(out, t.topic)
	}
	return out
}

// tierCleaning is the log cleaner's tiered state as the merge pass reads it.
type tierCleaning struct{ b *Broker }

// TierCleanerDue: the tiered cleaner would pick p next, by dirty ratio
// or by tombstones due.
func (c tierCleaning) TierCleanerDue(tpart tier.Partition, _ metadata.TopicConfig, now time.Time) bool {
	return c.b.cleaner.TierDue(cleanerView{c.b, tpart.(tierPartition).p}, now)
}

func (c tierCleaning) TierCheckpoint(tpart tier.Partition) int64 {
	return tpart.(tierPartition).p.cleaned.TierCheckpoint()
}

func (c tierCleaning) DeleteCompactedObjects(ctx context.Context) {
	c.b.bucket().DeleteReplaced(ctx)
}

// TierCounters returns a snapshot of the tiering counters.
func (b *Broker) TierCounters() TierCounters { return b.tiering.Counters() }

// TierManifest returns the in-memory manifest and the objects awaiting
// deletion.
func (b *Broker) TierManifest() TierManifestView { return b.tiering.ManifestView() }

// TierStatus describes every partition this broker leads (of topic, if
// not empty), sorted by topic and partition.
func (b *Broker) TierStatus(topic string) []PartitionTierStatus {
	return b.tierStatus(topic, false)
}

// ReplicaTierStatus is TierStatus of every partition this broker holds a
// replica of, led or followed (PartitionTierStatus.Leader tells which).
func (b *Broker) ReplicaTierStatus(topic string) []PartitionTierStatus {
	return b.tierStatus(topic, true)
}

// tierStatus lists the status of topic's partitions ("": every topic's)
// that this broker leads, and with followed those it follows too.
func (b *Broker) tierStatus(topic string, followed bool) []PartitionTierStatus {
	var out []PartitionTierStatus
	for _, t := range b.parts.allTopics() {
		if topic != "" && t.topic.Name != topic {
			continue
		}
		for i := range t.topic.Replicas {
			p, code := b.parts.lookup(t.topic.Name, int32(i))
			if code != 0 && followed {
				p, _ = b.parts.hosted(t.topic.Name, int32(i))
			}
			if p != nil {
				out = append(out, b.partitionTierStatus(p))
			}
		}
	}
	return out
}

// partitionTierStatus is the service's status of p plus the cleaner's.
func (b *Broker) partitionTierStatus(p *partition) PartitionTierStatus {
	st := b.tiering.Status(tierPartition{p, b})
	if p.config().HasCompact() {
		b.addCleanerStatus(p, &st)
	}
	return st
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
	st.Uncleanable = p.cleaned.Uncleanable()
}
