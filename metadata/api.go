package metadata

// This file is the contract other packages code against; a changed
// signature changes every caller (additions are free).

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors, translated to Kafka codes at the broker edge.
var (
	ErrTopicExists       = errors.New("metadata: topic already exists")       // TOPIC_ALREADY_EXISTS
	ErrTopicNotFound     = errors.New("metadata: topic not found")            // UNKNOWN_TOPIC_OR_PARTITION
	ErrCASFailed         = errors.New("metadata: compare-and-swap failed")    // stale version: caller was deposed / lost a race
	ErrInvalidConfig     = errors.New("metadata: invalid config")             // INVALID_CONFIG
	ErrInvalidPartitions = errors.New("metadata: invalid partition count")    // INVALID_PARTITIONS
	ErrInvalidTopic      = errors.New("metadata: invalid topic name")         // INVALID_TOPIC_EXCEPTION
	ErrInvalidReplicas   = errors.New("metadata: invalid replica assignment") // INVALID_REPLICA_ASSIGNMENT
	ErrCorrupt           = errors.New("metadata: corrupt value in etcd")      // a stored value failed to decode
	ErrClosed            = errors.New("metadata: store closed")
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
	// Logger receives the store's and the etcd client's warnings. Default:
	// slog.Default().
	Logger *slog.Logger
}

// DefaultCluster is the cluster name when Config.Cluster is empty.
const DefaultCluster = "strata"

// withDefaults fills unset fields.
func (c Config) withDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the config after defaults are applied: at least one
// endpoint, and a cluster name that is a single key segment.
func (c Config) Validate() error {
	c = c.withDefaults()
	if len(c.Endpoints) == 0 {
		return errors.New("metadata: no etcd endpoints")
	}
	if !validClusterName(c.Cluster) {
		return fmt.Errorf("metadata: invalid cluster name %q: use 1-64 of [a-zA-Z0-9._-]", c.Cluster)
	}
	return nil
}

// EmbeddedConfig starts an etcd server inside the process (single-node mode).
type EmbeddedConfig struct {
	// Dir holds etcd's data (<data-dir>/etcd).
	Dir string
	// ClientURL and PeerURL default to 127.0.0.1 with ports chosen by the OS
	// (so several brokers on one host do not collide).
	ClientURL, PeerURL string
	// Logger receives etcd's errors (etcd logs at error level only). Default:
	// slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds the wait for the server to become ready. Default 60s.
	StartTimeout time.Duration
}

// Validate checks the embedded config: a data dir is required; URLs, when
// given, must be http(s) URLs or host:port.
func (c EmbeddedConfig) Validate() error {
	if c.Dir == "" {
		return errors.New("metadata: embedded etcd needs a data dir")
	}
	for _, u := range []string{c.ClientURL, c.PeerURL} {
		if u != "" && strings.Contains(u, "://") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("metadata: embedded etcd URL %q: want http:// or host:port", u)
		}
	}
	return nil
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
	// LeaderBrokerEpoch is the registration epoch (BrokerInfo.Epoch) of
	// Leader when the controller elected it. A broker leads only while its
	// own registration has this epoch: after a restart (a new
	// registration) it waits until the controller raises the leader epoch.
	// 0 in states the controller never wrote (initial states): nobody
	// leads them until it does.
	LeaderBrokerEpoch int64
	// AddingReplicas and RemovingReplicas are set while the partition is
	// being reassigned (KIP-455): Replicas is then the target replicas
	// followed by the old ones that are leaving, AddingReplicas the target's
	// new members and RemovingReplicas the leaving ones. Both are empty
	// otherwise. The topic record's assignment of the partition equals
	// Replicas throughout (brokers host what the assignment names).
	AddingReplicas, RemovingReplicas []int32
	// ReassignStartMs is when the running reassignment began (unix ms, by
	// the clock of the broker that received it; 0 when none runs), for
	// the time a move takes.
	ReassignStartMs int64
	// Version is the etcd mod revision of this record; CAS compares on it.
	Version int64 `json:"-"`
}

// Reassigning reports whether a reassignment of the partition runs.
func (st PartitionState) Reassigning() bool {
	return len(st.AddingReplicas) > 0 || len(st.RemovingReplicas) > 0
}

// TargetReplicas is the replica list the partition will have once its
// reassignment completes (Replicas when none runs).
func (st PartitionState) TargetReplicas() []int32 {
	var out []int32
	for _, r := range st.Replicas {
		if !containsID(st.RemovingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

// OriginalReplicas is the replica list the partition had before its
// reassignment began (Replicas when none runs): what a cancel restores.
func (st PartitionState) OriginalReplicas() []int32 {
	var out []int32
	for _, r := range st.Replicas {
		if !containsID(st.AddingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

// BrokerInfo is a live broker's registration.
type BrokerInfo struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
	// Epoch identifies one registration of the broker (its etcd lease id,
	// set by RegisterBroker): it changes at every restart or re-register.
	Epoch int64
	// Draining is set by SetDraining on a controlled shutdown: the
	// controller moves leadership away and takes it out of ISRs.
	Draining bool
	// Endpoints are the advertised host:port of each named listener
	// ("PLAINTEXT", "SASL_SSL", "INTERNAL"...). Host and Port are
	// the endpoint of the broker's first listener, for readers that know
	// no listener names. Nil for brokers registered before listeners had
	// names. At most MaxBrokerEndpoints entries.
	Endpoints map[string]string
	// HTTP is the advertised host:port of the broker's HTTP server
	// (/v1/tier/status and the like), which other brokers fan out to.
	// Empty for brokers registered before it was advertised, or that
	// serve no HTTP: such a broker is reachable only over Kafka.
	HTTP string
}

// Endpoint is where the broker listens on the listener named name: its
// registered endpoint of that name, else Host:Port (brokers that
// registered without names serve one PLAINTEXT listener there).
func (b BrokerInfo) Endpoint(name string) string {
	if addr, ok := b.Endpoints[name]; ok {
		return addr
	}
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// MaxBrokerEndpoints bounds the named listeners of one registration.
const MaxBrokerEndpoints = 16

// Registration is a live broker registration (RegisterBroker).
type Registration struct {
	// Epoch is the registration's BrokerInfo.Epoch.
	Epoch int64
	// Lost is closed when the registration ends (see RegisterBroker).
	Lost <-chan struct{}
	// Info is what was registered (with Epoch set).
	Info BrokerInfo
}

// Event is one change seen by a watch of the metadata.
type Event struct {
	Kind      EventKind
	TopicName string          // for TopicPut, TopicDeleted; for PartitionPut when known
	TopicID   TopicID         // for TopicPut, TopicDeleted, PartitionPut
	Topic     *Topic          // for TopicPut; for TopicDeleted the last value
	Partition int32           // for PartitionPut
	State     *PartitionState // for PartitionPut
	// Tier is the entry of TierPut (new value) and TierDeleted (the last
	// value when etcd still had it, else only TopicID, Partition and
	// BaseOffset are set). Partition and TopicID are set too.
	Tier *TierEntry
	// TierLogStart is the new tiered log start of TierLogStartPut.
	TierLogStart int64
	Revision     int64
}

type EventKind int

const (
	TopicPut EventKind = iota
	TopicDeleted
	PartitionPut
	BrokersChanged
	// Resync: events were lost (etcd compacted the watched history, or the
	// watch broke). Discard the view and call Snapshot again; events after
	// this one continue from Revision.
	Resync
	// TierPut: a tier manifest entry was committed (Event.Tier).
	TierPut
	// TierDeleted: a tier manifest entry was deleted (Event.Tier).
	TierDeleted
	// TierLogStartPut: a partition's tiered log start moved up
	// (Event.TierLogStart).
	TierLogStartPut
)

func (k EventKind) String() string {
	switch k {
	case TopicPut:
		return "TopicPut"
	case TopicDeleted:
		return "TopicDeleted"
	case PartitionPut:
		return "PartitionPut"
	case BrokersChanged:
		return "BrokersChanged"
	case Resync:
		return "Resync"
	case TierPut:
		return "TierPut"
	case TierDeleted:
		return "TierDeleted"
	case TierLogStartPut:
		return "TierLogStartPut"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Snapshot is a consistent view of topics, partition states and brokers at
// one etcd revision.
type Snapshot struct {
	Revision int64
	Topics   []Topic
	// Partitions[id][p] is partition p's state (stored or initial).
	Partitions map[TopicID][]PartitionState
	Brokers    []BrokerInfo
	// Tier lists every tier manifest entry, grouped by partition and sorted
	// by base offset within one; TierLogStarts the partitions' tiered log
	// starts that were ever raised.
	Tier          []TierEntry
	TierLogStarts map[TierPartition]int64
}

// CreateTopicRequest is what CreateTopic writes.
type CreateTopicRequest struct {
	Name     string
	Replicas [][]int32 // one entry per partition
	Configs  map[string]string
	Internal bool
}
