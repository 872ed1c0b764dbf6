package broker

// Wiring of the log cleaner (package compaction): the broker's partitions
// and tier manifest, compactor and cold reader seen through the cleaner's
// interfaces. The cleaner runs in its own goroutine from Start to Shutdown
// when Config.Cleaner.Disable is false.

import (
	"fmt"

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

// cleanerPartitions lists the broker's local replicas for the cleaner.
type cleanerPartitions struct{ b *Broker }

func (c cleanerPartitions) Local() []compaction.Partition {
	local := c.b.parts.localPartitions()
	out := make([]compaction.Partition, len(local))
	for i, p := range local {
		out[i] = cleanerView{b: c.b, p: p}
	}
	return out
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
func (v cleanerView) State() *compaction.PartitionState { return &v.p.cleaned }
