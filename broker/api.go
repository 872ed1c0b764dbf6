package broker

// This file is the contract cmd/strata codes against. Replace STUB bodies;
// change signatures only by agreement.

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// Config configures one broker. Zero values get Kafka's defaults.
type Config struct {
	NodeID int32
	// Listen is the Kafka listener address (host:port; port 0 picks one).
	Listen string
	// Advertise is the host:port given to clients in Metadata. Default: the bound listen address.
	Advertise string
	Rack      string
	// DataDir holds <topic>-<partition>/ directories.
	DataDir    string
	Durability hotlog.Durability
	// SocketRequestMaxBytes (socket.request.max.bytes): larger frames close the connection before allocating. Default 100 MiB.
	SocketRequestMaxBytes int32
	// AutoCreateTopics (auto.create.topics.enable). Default true; set DisableAutoCreateTopics to turn off.
	DisableAutoCreateTopics bool
	// DefaultPartitions (num.partitions) for auto-created topics and CreateTopics with -1. Default 1.
	DefaultPartitions int32
	// RetentionCheckInterval (log.retention.check.interval.ms). Default 30s.
	RetentionCheckInterval time.Duration
	Logger                 *slog.Logger
}

// Broker is one Kafka-protocol server over its local logs and the cluster metadata.
type Broker struct{}

// New validates cfg and prepares a broker; nothing is opened until Start.
func New(cfg Config, store *metadata.Store) (*Broker, error) { panic("unimplemented") }

// Start registers the broker, opens and recovers the logs of its partitions
// and begins accepting connections. It returns once the listener is bound.
func (b *Broker) Start(ctx context.Context) error { panic("unimplemented") }

// Addr is the bound Kafka listener address (valid after Start).
func (b *Broker) Addr() net.Addr { panic("unimplemented") }

// Shutdown stops accepting, lets in-flight requests finish (until ctx ends),
// flushes and closes every log, and deregisters. Safe to call once.
func (b *Broker) Shutdown(ctx context.Context) error { panic("unimplemented") }
