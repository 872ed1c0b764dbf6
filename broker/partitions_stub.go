package broker

// STUB: replaced by partitions.go (connection/admin half).

import (
	"context"

	"github.com/strata-log/strata/metadata"
)

type partitionState struct{}

func (p *partition) highWatermark() int64         { panic("unimplemented") }
func (p *partition) lastStableOffset() int64      { panic("unimplemented") }
func (p *partition) leaderEpoch() int32           { panic("unimplemented") }
func (p *partition) config() metadata.TopicConfig { panic("unimplemented") }
func (p *partition) changed() <-chan struct{}     { panic("unimplemented") }
func (p *partition) waitHighWatermark(ctx context.Context, offset int64) error {
	panic("unimplemented")
}

func (b *Broker) lookupPartition(topic string, index int32) (*partition, int16) {
	panic("unimplemented")
}
func (b *Broker) lookupPartitionByID(id metadata.TopicID, index int32) (*partition, int16) {
	panic("unimplemented")
}
func (b *Broker) topicName(id metadata.TopicID) (string, bool) { panic("unimplemented") }
func (b *Broker) topicID(name string) (metadata.TopicID, bool) { panic("unimplemented") }
