package metadata

// This file is the contract other packages code against. Replace the STUB
// bodies; change signatures only by agreement.

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Sentinel errors, translated to Kafka codes at the broker edge.
var (
	ErrTopicExists       = errors.New("metadata: topic already exists")    // TOPIC_ALREADY_EXISTS
	ErrTopicNotFound     = errors.New("metadata: topic not found")         // UNKNOWN_TOPIC_OR_PARTITION
	ErrCASFailed         = errors.New("metadata: compare-and-swap failed") // stale version: caller was deposed / lost a race
	ErrInvalidConfig     = errors.New("metadata: invalid config")          // INVALID_CONFIG
	ErrInvalidPartitions = errors.New("metadata: invalid partition count") // INVALID_PARTITIONS
)

// Config configures the etcd client side.
type Config struct {
	// Endpoints of the etcd cluster (host:port or URLs).
	Endpoints []string
	// Cluster is the cluster name: every key lives under /strata/<Cluster>/.
	Cluster string
	// DialTimeout bounds the initial connection. Default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds each etcd call. Default 5s.
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// EmbeddedConfig starts an etcd server inside the process (single-node mode).
type EmbeddedConfig struct {
	// Dir holds etcd's data (<data-dir>/etcd).
	Dir string
	// ClientURL and PeerURL default to 127.0.0.1 with ports chosen by the OS
	// (so several brokers on one host do not collide).
	ClientURL, PeerURL string
	Logger             *slog.Logger
}

// TopicID is a Kafka topic id (a UUID, 16 bytes).
type TopicID [16]byte

// Topic is a topic's durable definition.
type Topic struct {
	Name     string
	ID       TopicID
	Internal bool
	// Replicas[p] lists the broker ids holding partition p, preferred leader first.
	Replicas [][]int32
	// Configs holds only the topic-level overrides (Kafka names → values);
	// defaults come from TopicConfigDefaults.
	Configs map[string]string
	// Revision is the etcd mod revision of the topic key (for CAS).
	Revision int64
}

// PartitionState is a partition's replicated-state record.
type PartitionState struct {
	Leader      int32 // broker id, -1 if none
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	// Version is the etcd mod revision of this record; CAS compares on it.
	Version int64 `json:"-"`
}

// BrokerInfo is a live broker's registration.
type BrokerInfo struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// Event is one change seen by a watch of the metadata.
type Event struct {
	Kind      EventKind
	TopicName string
	Topic     *Topic          // for TopicPut
	Partition int32           // for PartitionPut
	State     *PartitionState // for PartitionPut
	Revision  int64
}

type EventKind int

const (
	TopicPut EventKind = iota
	TopicDeleted
	PartitionPut
	BrokersChanged
)

// CreateTopicRequest is what CreateTopic writes.
type CreateTopicRequest struct {
	Name     string
	Replicas [][]int32 // one entry per partition
	Configs  map[string]string
	Internal bool
}

var _ = context.Background
