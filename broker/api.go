package broker

// This file is the contract cmd/strata codes against: a changed signature
// changes cmd/strata too.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/listeners"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/broker/wire"
	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/fetch/session"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/lag"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/quota"
	"github.com/strata-log/strata/replication/follower"
	"github.com/strata-log/strata/replication/peer"
	"github.com/strata-log/strata/tier"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("broker: invalid config")

// Config configures one broker. Zero values get Kafka's defaults.
type Config struct {
	NodeID int32
	// Listen is the Kafka listener address (host:port; port 0 picks one).
	Listen string
	// Advertise is the host:port given to clients in Metadata. Default: the bound listen address.
	Advertise string
	// AdvertiseHTTP is the host:port of this broker's HTTP server that
	// other brokers reach, registered as metadata.BrokerInfo.HTTP. An
	// empty host (":9644") takes the first listener's advertised host.
	// Empty: no HTTP address is registered.
	AdvertiseHTTP string
	Rack          string
	// DataDir holds <topic>-<partition>/ directories.
	DataDir    string
	Durability hotlog.Durability
	// FlushInterval spaces a busy partition's flush rounds under fsync
	// durability, so that the appends between them share one fdatasync
	// (hotlog.Config.FlushInterval). 0: flush as soon as the previous flush
	// finished.
	FlushInterval time.Duration
	// SocketRequestMaxBytes (socket.request.max.bytes): larger frames close the connection before allocating. Default 100 MiB.
	SocketRequestMaxBytes int32
	// FetchSessionCacheSlots (max.incremental.fetch.session.cache.slots)
	// bounds the incremental fetch sessions kept (fetch/session). 0: 1000;
	// negative: none, every fetch is a full one.
	FetchSessionCacheSlots int
	// AutoCreateTopics (auto.create.topics.enable). Default true; set DisableAutoCreateTopics to turn off.
	DisableAutoCreateTopics bool
	// DefaultPartitions (num.partitions) for auto-created topics and CreateTopics with -1. Default 1.
	DefaultPartitions int32
	// RetentionCheckInterval (log.retention.check.interval.ms). Default 30s.
	RetentionCheckInterval time.Duration
	// MaxInFlightRequests bounds the requests of one connection that are
	// read but not yet answered; the reader waits while it is reached.
	// Default 64.
	MaxInFlightRequests int
	// RegistrationTTL is the lease TTL of the broker registration, in
	// seconds. Default 10.
	RegistrationTTL int64
	// Group configures the consumer-group coordinator (broker/group):
	// offsets.topic.num.partitions, group.initial.rebalance.delay.ms,
	// session timeout bounds, offsets.retention.minutes. Zero values get
	// Kafka's defaults; its Logger is set by the broker.
	Group group.Config
	// Txn configures the transaction coordinator (broker/txn); zero values
	// get Kafka's defaults.
	Txn txn.Config
	// DisableTxnPartitionVerification turns off KIP-890 part 1: the partition
	// leader then accepts a transactional batch without asking the
	// coordinator that the partition is in the ongoing transaction. It is
	// Kafka's transaction.partition.verification.enable=false (default:
	// verification on).
	DisableTxnPartitionVerification bool
	// ProducerIDExpiration (producer.id.expiration.ms): a producer id
	// without an open transaction whose last write is this old is
	// forgotten by every partition (its next batch is accepted at any
	// sequence, KIP-360). Zero: 24h.
	ProducerIDExpiration time.Duration
	// TransactionVersion is the level of Kafka's transaction.version
	// feature a new cluster starts with: the first broker stores it as the
	// finalized level, and after that only UpdateFeatures changes it
	// (features.go). Advertised in ApiVersions (KIP-890, KIP-1022): 2 (the default, as a new Kafka 4 cluster) tells clients to
	// use Produce v12+ and TxnOffsetCommit v5+ (partitions are added to the
	// transaction implicitly) and EndTxn v5+ (the producer epoch is bumped
	// at every commit and abort); 1 keeps them on the explicit
	// AddPartitionsToTxn / AddOffsetsToTxn flow. Both are always served.
	// Zero: 2.
	TransactionVersion int16
	// ConsumerLagInterval is how often consumer-group lag and retention
	// margins are recomputed for /metrics (lag_wiring.go). Zero: 30s.
	ConsumerLagInterval time.Duration
	// RetentionWarnMargin: a group whose retention margin (time until
	// retention deletes the record at its committed offset) is below it
	// is logged, rate-limited. Zero: 6h; negative: never.
	RetentionWarnMargin time.Duration
	// ObjectStore is the bucket sealed segments are tiered to (cmd wires
	// --object-store through tier.OpenURL). nil: tiering is off, and the
	// whole log stays local (retention.* applies locally).
	ObjectStore tier.ObjectStore
	// Tier configures the uploader, local/remote retention and upload-lag
	// throttling (tier.Config). Zero values get defaults.
	Tier TierConfig
	// Diskless configures diskless topics (diskless_wiring.go). Unused
	// when ObjectStore is nil.
	Diskless DisklessConfig
	// Cold configures the cold reader that serves offsets below the local
	// log start from the bucket (cold_wiring.go; tier.ColdConfig documents
	// fields and defaults). Unused when ObjectStore is nil.
	Cold tier.ColdConfig
	// Cleaner configures the log cleaner of compacted topics
	// (compaction.CleanerConfig documents fields and defaults).
	Cleaner compaction.CleanerConfig
	// Replication (replica.go; followers: replication/follower).
	//
	// PeerAddresses overrides the host:port used to reach other brokers
	// for replication, by node id (default: their advertised address).
	// For NAT, and for the test harness's fault-injecting proxies.
	PeerAddresses map[int32]string
	// ReplicaLagTimeMax (replica.lag.time.max.ms): a follower that has not
	// caught up for this long leaves the ISR. Default 30s.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchMaxWait (replica.fetch.wait.max.ms): a follower's fetch
	// long-poll. Default 500ms.
	ReplicaFetchMaxWait time.Duration
	// DefaultReplicationFactor (default.replication.factor) for
	// auto-created topics and CreateTopics with -1. Default 1.
	DefaultReplicationFactor int16
	// OffsetsTopicReplicationFactor (offsets.topic.replication.factor),
	// capped by the live brokers when __consumer_offsets is created.
	// Default 3.
	OffsetsTopicReplicationFactor int16
	// ControlledShutdownTimeout bounds how long Shutdown waits for the
	// controller to move this broker's leaderships away. Default 30s.
	ControlledShutdownTimeout time.Duration
	// LeaderRebalanceInterval (leader.imbalance.check.interval.seconds,
	// with auto.leader.rebalance.enable): how often the controller moves
	// leadership back to preferred replicas. Default 5m; negative: never.
	LeaderRebalanceInterval time.Duration
	// AutoBalanceInterval (serve --auto-balance): how often the controller,
	// when this broker is elected, balances replicas and preferred
	// leaderships over the brokers itself (controller.AutoBalance). 0:
	// never, the default.
	AutoBalanceInterval time.Duration
	// AutoBalanceMaxMoves bounds the moves one auto-balance round begins.
	// Default controller.DefaultAutoBalanceMaxMoves.
	AutoBalanceMaxMoves int
	// ReassignmentBytesPerSecond bounds the bytes a leader serves to
	// replicas being added by reassignments (the static value of
	// leader.replication.throttled.rate and
	// follower.replication.throttled.rate; 0: unlimited).
	ReassignmentBytesPerSecond int64
	// ControllerDebounce is how long the active controller waits after a
	// metadata change before it plans (controller.Config.Debounce).
	// Default 50ms.
	ControllerDebounce time.Duration
	// Security and hardening (listeners.go; SASL and connection limits in broker/wire).
	//
	// Listeners are the named listeners (Kafka's listeners,
	// advertised.listeners and listener.security.protocol.map; see
	// ParseListeners). Empty: one PLAINTEXT listener named "PLAINTEXT"
	// on Listen, advertised as Advertise.
	Listeners []ListenerConfig
	// InterBrokerListener (inter.broker.listener.name) names the listener
	// peers connect to for replication and transaction markers. Default:
	// the first listener.
	InterBrokerListener string
	// InterBrokerTLS is the client TLS configuration for an SSL or
	// SASL_SSL inter-broker listener (CAs, and a certificate for mTLS).
	// nil: the system roots, no client certificate.
	InterBrokerTLS *tls.Config
	// InterBrokerSASL is this broker's identity on a SASL inter-broker
	// listener.
	InterBrokerSASL InterBrokerSASL
	// SuperUsers (super.users) are principals allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACL (allow.everyone.if.no.acl.found): with the
	// authorizer on, a resource that no ACL matches is open to everyone.
	AllowEveryoneIfNoACL bool
	// Authorizer turns ACL authorization on (authorizer.class.name set):
	// requests are denied unless an ACL allows them.
	Authorizer bool
	// MaxConnections (max.connections) bounds the open client connections
	// of the broker, MaxConnectionsPerIP (max.connections.per.ip) those
	// from one IP address; more are closed at accept. 0: unbounded. A
	// separate inter-broker listener is exempt from MaxConnections.
	MaxConnections      int
	MaxConnectionsPerIP int
	// QueuedMaxRequestBytes (queued.max.request.bytes) bounds the bytes of
	// requests read and not yet handled, across all connections; readers
	// wait for room. 0 or negative: unbounded.
	QueuedMaxRequestBytes int64
	Logger                *slog.Logger
}

// DefaultFlushInterval is strata serve's --flush-interval: at 20,000
// one-record requests per second on one partition it cut the broker's CPU
// from 0.78 to about a third of a core (test/bench/produce.sh,
// small-requests rows), at about 2 ms more latency for those writes only.
const DefaultFlushInterval = 2 * time.Millisecond

const (
	defaultSocketRequestMaxBytes = 100 << 20
	// defaultFetchSessionCacheSlots is Kafka's
	// max.incremental.fetch.session.cache.slots default.
	defaultFetchSessionCacheSlots = 1000
	defaultRetentionCheck         = 30 * time.Second
	defaultMaxInFlight            = 64
	defaultRegistrationTTL        = 10
)

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:9092"
	}
	if c.SocketRequestMaxBytes == 0 {
		c.SocketRequestMaxBytes = defaultSocketRequestMaxBytes
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 1
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = defaultRetentionCheck
	}
	if c.FetchSessionCacheSlots == 0 {
		c.FetchSessionCacheSlots = defaultFetchSessionCacheSlots
	}
	if c.MaxInFlightRequests == 0 {
		c.MaxInFlightRequests = defaultMaxInFlight
	}
	if c.RegistrationTTL == 0 {
		c.RegistrationTTL = defaultRegistrationTTL
	}
	if c.ReplicaLagTimeMax == 0 {
		c.ReplicaLagTimeMax = 30 * time.Second
	}
	if c.ReplicaFetchMaxWait == 0 {
		c.ReplicaFetchMaxWait = 500 * time.Millisecond
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = 1
	}
	if c.OffsetsTopicReplicationFactor == 0 {
		c.OffsetsTopicReplicationFactor = 3
	}
	if c.ControlledShutdownTimeout == 0 {
		c.ControlledShutdownTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Tier = c.Tier.WithDefaults()
	c.Cleaner = c.Cleaner.WithDefaults()
	if c.TransactionVersion == 0 {
		c.TransactionVersion = maxTransactionVersion
	}
	if c.ConsumerLagInterval == 0 {
		c.ConsumerLagInterval = 30 * time.Second
	}
	if c.RetentionWarnMargin == 0 {
		c.RetentionWarnMargin = 6 * time.Hour
	}
	return c
}

// Validate rejects configurations that cannot work (after defaults).
func (c Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("%w: node id %d < 0", ErrInvalidConfig, c.NodeID)
	case c.DataDir == "":
		return fmt.Errorf("%w: empty data dir", ErrInvalidConfig)
	case c.SocketRequestMaxBytes < wire.MinRequestHeaderBytes:
		return fmt.Errorf("%w: socket.request.max.bytes %d too small", ErrInvalidConfig, c.SocketRequestMaxBytes)
	case c.DefaultPartitions < 1 || c.DefaultPartitions > maxPartitions:
		return fmt.Errorf("%w: num.partitions %d", ErrInvalidConfig, c.DefaultPartitions)
	case c.RetentionCheckInterval < 0 || c.MaxInFlightRequests < 1 || c.RegistrationTTL < 1:
		return fmt.Errorf("%w: negative interval, in-flight bound or ttl", ErrInvalidConfig)
	case c.ReplicaLagTimeMax < 0 || c.ReplicaFetchMaxWait < 0 || c.ControlledShutdownTimeout < 0 ||
		c.DefaultReplicationFactor < 1 || c.OffsetsTopicReplicationFactor < 1:
		return fmt.Errorf("%w: negative replication setting", ErrInvalidConfig)
	case c.Durability != hotlog.DurabilityFsync && c.Durability != hotlog.DurabilityReplication:
		return fmt.Errorf("%w: durability %d", ErrInvalidConfig, c.Durability)
	case c.FlushInterval < 0:
		return fmt.Errorf("%w: flush interval %v < 0", ErrInvalidConfig, c.FlushInterval)
	case c.ProducerIDExpiration < 0:
		return fmt.Errorf("%w: producer.id.expiration %v < 0", ErrInvalidConfig, c.ProducerIDExpiration)
	case c.ConsumerLagInterval < 0:
		return fmt.Errorf("%w: consumer lag interval %s: want > 0", ErrInvalidConfig, c.ConsumerLagInterval)
	case c.TransactionVersion < 1 || c.TransactionVersion > maxTransactionVersion:
		return fmt.Errorf("%w: transaction.version %d (supported: 1-%d)", ErrInvalidConfig, c.TransactionVersion, maxTransactionVersion)
	}
	if err := c.Tier.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Cleaner.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Group.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if c.Advertise != "" {
		if _, _, err := listeners.SplitHostPort(c.Advertise); err != nil {
			return fmt.Errorf("%w: advertise: %v", ErrInvalidConfig, err)
		}
	}
	if c.AdvertiseHTTP != "" {
		if _, port, err := listeners.SplitHostPort(c.AdvertiseHTTP); err != nil || port == 0 {
			return fmt.Errorf("%w: advertised HTTP address %q: want host:port with a port", ErrInvalidConfig, c.AdvertiseHTTP)
		}
	}
	if c.MaxConnections < 0 || c.MaxConnectionsPerIP < 0 {
		return fmt.Errorf("%w: negative connection limit", ErrInvalidConfig)
	}
	return c.validateListeners()
}

// Broker is one Kafka-protocol server over its local logs and the cluster metadata.
type Broker struct {
	cfg   Config
	store *metadata.Store
	log   *slog.Logger
	apis  apiTable

	// Set by Start, read-only afterwards. ln is the first listener's.
	ln         net.Listener
	listeners  []*listener
	clusterID  string
	advertised metadata.BrokerInfo

	// lifetime ends the background loops (watch, retention, registration).
	lifetime       context.Context
	lifetimeCancel context.CancelFunc
	// drainStart ends when shutdown starts draining connections: fetch
	// long-polls then answer at once instead of holding the drain up to
	// their max wait. Set by New.
	drainStart context.Context
	draining   context.CancelFunc
	loops      sync.WaitGroup // acceptLoop, watchLoop, retentionLoop

	// conns runs the client connections (server.go). Set by New.
	conns *wire.Server
	// connLimits admits connections at accept (MaxConnections,
	// MaxConnectionsPerIP). Set by New.
	connLimits *wire.ConnLimiter
	// queued bounds the bytes of requests read and not yet handled
	// (QueuedMaxRequestBytes). Set by New.
	queued *wire.ByteBudget

	parts    partitionManager
	liveBrks liveBrokers
	// pids hands out producer ids (InitProducerId). Set by New.
	pids *metadata.ProducerIDs
	// groups coordinates the consumer groups of the __consumer_offsets
	// partitions this node leads. Set by New.
	groups *group.Coordinator
	// txns coordinates the transactional ids of the __transaction_state
	// partitions this node leads; txnRouter carries its inter-broker
	// messages through the txnPeers clients (txn_wiring.go). Set by New.
	txns      *txn.Coordinator
	txnRouter *txn.Router
	txnPeers  txnPeerSet

	// manifest is the in-memory tier manifest (fed by the watch loop and
	// the uploader); objects is cfg.ObjectStore (nil: tiering off). Set by
	// New, read-only pointers afterwards.
	manifest *tier.Manifest
	objects  tier.ObjectStore
	// cold serves reads below the local log start from objects (nil when
	// tiering is off); coldSrc reads a partition's history through it.
	// Set by New, closed by shutdown (cold_wiring.go).
	cold    *tier.ColdReader
	coldSrc tier.ColdSource
	// compactor rewrites tiered objects of compacted topics (nil when
	// tiering is off), for the cleaner and the merge pass; cleaner is the
	// log cleaner (cleaner.go). Set by New.
	compactor *tier.Compactor
	cleaner   *compaction.Cleaner
	// tiering runs the uploader, retention across tiers, the sweeper and
	// the merge pass (package tier; tier_wiring.go). Set by New.
	tiering *tier.Service
	// diskless appends, indexes and reads diskless topics (nil when
	// tiering is off). Set by New (diskless_wiring.go).
	diskless *disklessService

	// reg holds the live etcd registration (its Epoch decides which
	// partition states this broker may lead). Set by New.
	reg *metadata.Registrar
	// followers fetch the partitions this node follows from their leaders
	// (replication/follower; wiring in follower.go).
	followers *follower.Manager
	// peers resolves and dials other brokers (peer.go). Set by New.
	peers peer.Dialer
	// ctrl is this broker's controller candidate (controller package);
	// nil until Start.
	ctrl *controller.Controller

	// dynamic are the dynamic broker configs as last loaded from etcd
	// (dynamic_configs.go; applied by its watch loop).
	dynamic dynamicConfigs
	// features are the cluster's finalized feature levels as last loaded
	features finalizedFeatures
	// lagMonitor computes consumer-group lag and retention margins
	// (lag_wiring.go); nil until Start. publishedHolds is the retention
	// hold record this broker last wrote (only its loop touches it).
	lagMonitor     *lag.Monitor
	publishedHolds string

	// fetchSessions are the incremental fetch sessions (fetch/session;
	// wiring in fetch_sessions.go). Set by New.
	fetchSessions *session.Cache

	// metrics are the topic byte counters (metrics.go; atomics).
	metrics brokerMetrics
	// moves throttles what this broker serves, as leader, to replicas
	// being added (moveThrottle.go).
	moves moveThrottle
	// quotas are the client quotas and their rates (quotas.go; loads
	// from store, attached by New).
	quotas quota.Manager
	// authz checks requests against the ACL snapshot (authz.go;
	// configured by New).
	authz authorizer

	startOnce, shutdownOnce sync.Once
}

// New validates cfg and prepares a broker; nothing is opened until Start.
func New(cfg Config, store *metadata.Store) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil metadata store", ErrInvalidConfig)
	}
	b := &Broker{cfg: cfg, store: store}
	b.log = b.componentLog("broker")
	b.drainStart, b.draining = context.WithCancel(context.Background())
	b.reg = metadata.NewRegistrar(store, cfg.NodeID, cfg.RegistrationTTL)
	b.pids = metadata.NewProducerIDs(store)
	b.peers = newPeerDialer(b)
	b.followers = newFollowers(b)
	b.manifest, b.objects = tier.NewManifest(), cfg.ObjectStore
	if err := b.initColdReader(); err != nil {
		return nil, err
	}
	if err := b.initCleaner(); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.tiering = b.newTierService()
	b.initDiskless()
	groups, err := b.newCoordinator()
	if err != nil {
		return nil, err
	}
	b.groups = groups
	if b.txns, b.txnRouter, err = b.newTxnCoordinator(); err != nil {
		return nil, err
	}
	b.fetchSessions = session.NewCache(session.Config{Slots: cfg.FetchSessionCacheSlots})
	b.apis = newAPITable(b)
	b.connLimits = wire.NewConnLimiter(wire.ConnLimits{MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnectionsPerIP})
	b.queued = wire.NewByteBudget(cfg.QueuedMaxRequestBytes)
	if b.conns, err = newConnServer(b); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.parts.init()
	b.parts.configure(registryDeps{node: cfg.NodeID, dataDir: cfg.DataDir, durability: cfg.Durability, flushInterval: cfg.FlushInterval,
		producerIDExpiration: cfg.ProducerIDExpiration, manifest: b.manifest, tiered: b.tieringEnabled,
		replicas: b, coords: b, moveDone: b.metrics.moveDurations.observe, log: b.log})
	b.liveBrks.setSelf(metadata.BrokerInfo{NodeID: cfg.NodeID})
	b.lifetime, b.lifetimeCancel = context.WithCancel(context.Background())
	b.initReplicaShell()
	b.quotas.Attach(store, b.lifetime, b.log)
	b.authz.Configure(cfg.Authorizer, auth.Policy{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACL: cfg.AllowEveryoneIfNoACL}, store, b.log)
	return b, nil
}

// Start registers the broker, opens and recovers the logs of its partitions
// and begins accepting connections. It returns once the listener is bound.
func (b *Broker) Start(ctx context.Context) error {
	err := errors.New("broker: already started")
	b.startOnce.Do(func() { err = b.start(ctx) })
	return err
}

func (b *Broker) start(ctx context.Context) error {
	bound, err := listeners.Open(b.cfg.listeners())
	if err != nil {
		return err
	}
	b.listeners, b.ln = bound, bound[0].Listener
	if err := b.startBackground(ctx); err != nil {
		listeners.Close(bound)
		b.groups.Close()
		b.closeTxns()
		b.lifetimeCancel()
		b.loops.Wait()
		b.parts.closeAll(b.log)
		return err
	}
	for _, l := range bound {
		b.loops.Add(1)
		go b.acceptLoop(l)
		b.log.Info("listening", "listener", l.Config.Name, "security", l.Config.Security, "addr", l.Listener.Addr().String(),
			"advertise", l.Endpoint)
	}
	b.log.Info("broker started", "listen", b.ln.Addr().String(), "advertise",
		net.JoinHostPort(b.advertised.Host, strconv.Itoa(int(b.advertised.Port))), "cluster_id", b.clusterID,
		"inter_broker_listener", b.cfg.interBrokerListener())
	return nil
}

// componentLog is the logger of one of the broker's parts: its lines carry
// component=<name> and the node id once each (a logger With'ed twice would
// repeat the key, which JSON logs must not).
func (b *Broker) componentLog(name string) *slog.Logger {
	return b.cfg.Logger.With("component", name, "node", b.cfg.NodeID)
}

// startBackground loads metadata, opens logs, registers, and starts the
// watch and retention loops.
func (b *Broker) startBackground(ctx context.Context) error {
	id, err := b.store.ClusterID(ctx)
	if err != nil {
		return fmt.Errorf("broker: cluster id: %w", err)
	}
	b.clusterID = id
	if b.advertised, err = b.registrationInfo(); err != nil {
		return err
	}
	b.liveBrks.setSelf(b.advertised)
	if err := b.startPartitions(ctx); err != nil {
		return err
	}
	if err := b.authz.Start(ctx, b.lifetime, &b.loops); err != nil {
		return fmt.Errorf("broker: loading ACLs: %w", err)
	}
	if err := b.startDynamicConfigs(ctx); err != nil {
		return fmt.Errorf("broker: loading dynamic broker configs: %w", err)
	}
	if err := b.startFeatures(ctx); err != nil {
		return fmt.Errorf("broker: loading finalized features: %w", err)
	}
	b.groups.Start()
	b.txns.Start()
	b.startLagMonitor()
	reg, err := b.reg.Register(b.lifetime, b.advertised)
	if err != nil {
		return fmt.Errorf("broker: register: %w", err)
	}
	b.liveBrks.refresh(ctx, b.store, b.log)
	ctrl, err := controller.Start(b.lifetime, controller.Config{
		NodeID: b.cfg.NodeID, Store: b.store, SessionTTL: time.Duration(b.cfg.RegistrationTTL) * time.Second,
		RebalanceInterval: b.cfg.LeaderRebalanceInterval, Debounce: b.cfg.ControllerDebounce,
		AutoBalanceInterval: b.cfg.AutoBalanceInterval, AutoBalanceMaxMoves: b.cfg.AutoBalanceMaxMoves,
		Logger: b.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("broker: controller: %w", err)
	}
	b.ctrl = ctrl
	known, cancel := context.WithTimeout(ctx, controllerWait) // so the first Metadata answers name it
	b.ctrl.WaitKnown(known)
	cancel()
	b.awaitOwnElections(ctx)
	b.loops.Add(2)
	go b.retentionLoop()
	if b.objects != nil {
		b.loops.Add(1)
		go func() {
			defer b.loops.Done()
			b.tiering.Run(b.lifetime)
		}()
	}
	if b.diskless != nil {
		b.loops.Add(1)
		go func() {
			defer b.loops.Done()
			b.runDiskless(b.lifetime)
		}()
	}
	if !b.cfg.Cleaner.Disable {
		b.loops.Add(1)
		go func() {
			defer b.loops.Done()
			b.cleaner.Run(b.lifetime)
		}()
	}
	go b.watchLost(reg.Lost)
	return nil
}

// watchLost registers again whenever the registration lease is lost.
// On loss the broker stops leading at once (registrationLost, replica.go):
// the lease may expire on the server soon and the controller then elects
// other leaders. The new registration has a new epoch, so the broker
// leads again only where the controller elects it anew.
func (b *Broker) watchLost(lost <-chan struct{}) {
	defer b.loops.Done()
	for {
		select {
		case <-lost:
		case <-b.lifetime.Done():
			return
		}
		b.log.Error("broker registration lease lost; fencing leadership and registering again")
		b.registrationLost()
		reg, ok := b.reg.Reregister(b.lifetime, b.advertised, b.log)
		if !ok {
			return
		}
		b.registered()
		lost = reg.Lost
	}
}

// registration is the current registration; Epoch 0 while unregistered.
func (b *Broker) registration() metadata.Registration { return b.reg.Current() }

// NodeID is this broker's id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// LiveBrokers lists the registered brokers as this broker last saw them
// (refreshed on every change of the registrations), sorted by node id and
// always including this one.
func (b *Broker) LiveBrokers() []metadata.BrokerInfo { return b.liveBrks.all() }

// Addr is the bound Kafka listener address (valid after Start).
func (b *Broker) Addr() net.Addr {
	if b.ln == nil {
		return nil
	}
	return b.ln.Addr()
}

// Shutdown stops accepting, lets in-flight requests finish (until ctx ends),
// flushes and closes every log, and deregisters. Safe to call once.
func (b *Broker) Shutdown(ctx context.Context) error {
	err := errors.New("broker: already shut down")
	b.shutdownOnce.Do(func() { err = b.shutdown(ctx) })
	return err
}

func (b *Broker) shutdown(ctx context.Context) error {
	// Hand leadership over while still serving, so clients meet the new
	// leaders through NOT_LEADER_OR_FOLLOWER instead of a dead socket.
	b.handOverLeadership(ctx)
	if b.ctrl != nil {
		_ = b.ctrl.Close()
	}
	listeners.Close(b.listeners)
	// Resigning the groups first answers joins and syncs that wait for a
	// rebalance (NOT_COORDINATOR: clients find the coordinator again), so
	// they do not hold up the drain.
	b.groups.Close()
	b.closeTxns()
	b.draining()
	drainErr := b.conns.Drain(ctx)
	// Handlers that ignore their context must not hang shutdown.
	b.conns.Close(time.Second)
	b.lifetimeCancel()
	b.loops.Wait()
	b.followers.Close()
	if b.diskless != nil {
		b.diskless.appender.Close() // after the drain: answered produces are committed
	}
	b.closeColdReader()
	closeErr := b.parts.closeAll(b.log)
	b.log.Info("broker stopped")
	return errors.Join(drainErr, closeErr)
}
