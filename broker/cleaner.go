package broker

// Wiring of the log cleaner (package compaction): the broker's partitions
// and tier manifest, compactor and cold reader seen through the cleaner's
// interfaces. The cleaner runs in its own goroutine from Start to Shutdown
// when Config.Cleaner.Disable is false.

import (
	"fmt"
	"sync"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// initCleaner creates the tiered compactor (tiering on; shared by the
// cleaner and the merge pass) and the cleaner.
func (b *Broker) initCleaner() error {
	deps := compaction.CleanerDeps{Partitions: cleanerPartitions{b}, Manifest: b.manifest,
		SpoolDir: b.cfg.DataDir, Logger: b.componentLog("cleaner")}
	if b.objects != nil {
		c, err := tier.NewCompactor(tier.CompactorConfig{Store: b.objects, Swapper: b.store, Manifest: b.manifest,
			Cluster: b.store.Cluster(), TempDir: b.cfg.DataDir, DeleteGrace: b.cfg.Cleaner.ObjectDeleteGrace,
			Cold: b.cold, Logger: b.log})
		if err != nil {
			return fmt.Errorf("tiered compactor: %w", err)
		}
		b.compactor = c
		deps.Tier = b.bucket()
	}
	cleaner, err := compaction.NewCleaner(b.cfg.Cleaner, deps)
	if err != nil {
		return fmt.Errorf("cleaner: %w", err)
	}
	b.cleaner = cleaner
	return nil
}

// bucket is the cleaner's and the merge pass's view of the bucket.
func (b *Broker) bucket() compaction.BucketStore {
	return compaction.BucketStore{Compactor: b.compactor, Objects: b.objects, Cold: b.cold, Logger: b.log}
}

// cleanerPartitions lists the broker's local replicas for the cleaner, and
// the diskless partitions it merges (their segment objects are cleaned in
// the bucket as a tiered leader's are).
type cleanerPartitions struct{ b *Broker }

func (c cleanerPartitions) Local() []compaction.Partition {
	local := c.b.parts.localPartitions()
	out := make([]compaction.Partition, len(local))
	for i, p := range local {
		out[i] = cleanerView{b: c.b, p: p}
	}
	return append(out, c.b.disklessCleanerViews()...)
}

// cleanerView is one local replica as the cleaner sees it.
type cleanerView struct {
	b *Broker
	p *partition
}

var _ compaction.Partition = cleanerView{}

func (v cleanerView) Topic() string                     { return v.p.topic }
func (v cleanerView) TopicID() metadata.TopicID         { return v.p.topicID }
func (v cleanerView) Index() int32                      { return v.p.index }
func (v cleanerView) Log() compaction.Log               { return v.p.log }
func (v cleanerView) Config() metadata.TopicConfig      { return v.p.config() }
func (v cleanerView) HighWatermark() int64              { return v.p.highWatermark() }
func (v cleanerView) LastStableOffset() int64           { return v.p.lastStableOffset() }
func (v cleanerView) IsLeader() bool                    { return v.p.isLeader() }
func (v cleanerView) LeaderEpoch() int32                { return v.p.leaderEpoch() }
func (v cleanerView) Tiered() bool                      { return v.b.tieringEnabled(v.p.topic, v.p.config()) }
func (v cleanerView) KeepsLocalLog() bool               { return keepsLocalLog(v.p.topic) }
func (v cleanerView) TierCleanEnd() int64               { return v.p.highWatermark() }
func (v cleanerView) State() *compaction.PartitionState { return &v.p.cleaned }

// disklessCleanerViews are the compacted diskless partitions this broker
// merges (disklessOwned: one live broker each), for the cleaner's tiered
// pass. Their cleaner state lives while this broker owns them.
func (b *Broker) disklessCleanerViews() []compaction.Partition {
	d := b.diskless
	if d == nil {
		return nil
	}
	var out []compaction.Partition
	states := make(map[metadata.TierPartition]*compaction.PartitionState)
	d.cleaned.mu.Lock()
	defer d.cleaned.mu.Unlock()
	for _, mp := range b.disklessOwned() {
		if _, cfg, ok := b.parts.disklessTopic(mp.Topic); !ok || !cfg.HasCompact() {
			continue
		}
		st := d.cleaned.byPartition[mp.Part]
		if st == nil {
			st = new(compaction.PartitionState)
		}
		states[mp.Part] = st
		out = append(out, disklessCleanerView{b: b, topic: mp.Topic, tp: mp.Part, state: st})
	}
	d.cleaned.byPartition = states
	return out
}

// disklessCleanerStates are the cleaner's states of the compacted diskless
// partitions this broker merges.
type disklessCleanerStates struct {
	mu          sync.Mutex
	byPartition map[metadata.TierPartition]*compaction.PartitionState
}

// disklessCleanerView is a diskless partition as the cleaner sees it: no
// local log, led here (this broker merges it), epoch 0, its bucket objects
// cleanable up to its merged end.
type disklessCleanerView struct {
	b     *Broker
	topic string
	tp    metadata.TierPartition
	state *compaction.PartitionState
}

var _ compaction.Partition = disklessCleanerView{}

func (v disklessCleanerView) Topic() string             { return v.topic }
func (v disklessCleanerView) TopicID() metadata.TopicID { return v.tp.TopicID }
func (v disklessCleanerView) Index() int32              { return v.tp.Partition }
func (v disklessCleanerView) Log() compaction.Log       { return compaction.NoLocalLog }
func (v disklessCleanerView) Config() metadata.TopicConfig {
	_, cfg, _ := v.b.parts.disklessTopic(v.topic)
	return cfg
}
func (v disklessCleanerView) HighWatermark() int64 {
	_, next, _ := v.b.diskless.index.Positions(v.tp)
	return next
}
func (v disklessCleanerView) LastStableOffset() int64           { return v.HighWatermark() } // no transactions
func (v disklessCleanerView) IsLeader() bool                    { return true }
func (v disklessCleanerView) LeaderEpoch() int32                { return 0 }
func (v disklessCleanerView) Tiered() bool                      { return true }
func (v disklessCleanerView) KeepsLocalLog() bool               { return false }
func (v disklessCleanerView) TierCleanEnd() int64               { return v.b.diskless.index.MergedEnd(v.tp) }
func (v disklessCleanerView) State() *compaction.PartitionState { return v.state }
