package metadata

// STUB: replaced by the metadata implementer.

import "context"

// Embedded is an etcd server running in this process.
type Embedded struct{}

func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) { panic("unimplemented") }
func (e *Embedded) Endpoints() []string                   { panic("unimplemented") }
func (e *Embedded) Close() error                          { panic("unimplemented") }

// Store is the etcd-backed metadata of one cluster.
type Store struct{}

func Open(ctx context.Context, cfg Config) (*Store, error) { panic("unimplemented") }
func (s *Store) Close() error                              { panic("unimplemented") }

// ClusterID returns the cluster id, creating it on first use (CAS: create-if-absent).
func (s *Store) ClusterID(ctx context.Context) (string, error) { panic("unimplemented") }

// CreateTopic writes the topic, its name→id index and one PartitionState per
// partition (leader = first replica, epoch 0, ISR = replicas) in one txn.
func (s *Store) CreateTopic(ctx context.Context, req CreateTopicRequest) (Topic, error) {
	panic("unimplemented")
}

// DeleteTopic removes the topic and its partition states in one txn.
func (s *Store) DeleteTopic(ctx context.Context, name string) error { panic("unimplemented") }

// Topic reads one topic.
func (s *Store) Topic(ctx context.Context, name string) (Topic, error) { panic("unimplemented") }

// Topics lists all topics.
func (s *Store) Topics(ctx context.Context) ([]Topic, error) { panic("unimplemented") }

// AlterTopicConfigs applies mutate to the topic's override map and writes it
// back with a CAS on the topic's revision, retrying on conflict.
func (s *Store) AlterTopicConfigs(ctx context.Context, name string, mutate func(map[string]string) error) (Topic, error) {
	panic("unimplemented")
}

// AddPartitions appends partitions with the given replica lists.
func (s *Store) AddPartitions(ctx context.Context, name string, replicas [][]int32) (Topic, error) {
	panic("unimplemented")
}

// PartitionStates returns the states of every partition of a topic, indexed by partition.
func (s *Store) PartitionStates(ctx context.Context, id TopicID) ([]PartitionState, error) {
	panic("unimplemented")
}

// CASPartitionState writes st if the stored version equals st.Version;
// otherwise ErrCASFailed. Returns the new version.
func (s *Store) CASPartitionState(ctx context.Context, id TopicID, partition int32, st PartitionState) (int64, error) {
	panic("unimplemented")
}

// RegisterBroker puts the broker under a lease kept alive until ctx ends or
// Close; lost() is closed if the lease cannot be renewed.
func (s *Store) RegisterBroker(ctx context.Context, b BrokerInfo, ttl int64) (lost <-chan struct{}, err error) {
	panic("unimplemented")
}

// Brokers lists registered brokers.
func (s *Store) Brokers(ctx context.Context) ([]BrokerInfo, error) { panic("unimplemented") }

// Watch streams changes to topics, partition states and brokers after
// revision rev (0: from now).
func (s *Store) Watch(ctx context.Context, rev int64) <-chan Event { panic("unimplemented") }

// AllocateProducerIDs reserves a block of count producer ids cluster-wide
// (CAS on a counter key) and returns the first.
func (s *Store) AllocateProducerIDs(ctx context.Context, count int64) (int64, error) {
	panic("unimplemented")
}
