package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/diskless"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// serveFlags holds the raw values of `strata serve`'s flags (DESIGN.md §11
// plus the broker defaults Kafka exposes as server properties).
type serveFlags struct {
	nodeID                 int
	listen                 string
	advertise              string
	dataDir                string
	etcd                   string
	cluster                string
	objectStore            string
	durability             string
	flushInterval          time.Duration
	http                   string
	advertiseHTTP          string
	rack                   string
	logLevel               string
	logFormat              string
	pprof                  bool
	autoCreateTopics       bool
	numPartitions          int
	fetchSessionSlots      int
	retentionCheckInterval time.Duration
	retentionWarnMargin    time.Duration
	retentionHold          time.Duration
	retentionHoldBytes     int64
	consumerLagInterval    time.Duration
	// Consumer groups (broker/group).
	groupInitialRebalanceDelay time.Duration
	offsetsTopicPartitions     int
	offsetsRetention           time.Duration
	consumerGroups             consumerGroupFlags
	// Tiered storage (tier.Config).
	tierUploadMaxLagBytes int64
	tierUploadMaxLag      time.Duration
	tierMergeInterval     time.Duration
	tierMergeGrace        time.Duration
	tierOrphanGrace       time.Duration
	tierUploadInterval    time.Duration
	tierSweepInterval     time.Duration
	// Cold reader (tier.ColdConfig): reads below the local log start.
	coldCacheBytes int64
	// diskless topics (registerDiskless)
	disklessLinger     time.Duration
	disklessMaxBytes   int
	disklessCacheBytes int64
	disklessMergeAge   time.Duration
	disklessMergeEvery time.Duration
	coldFetchSize      int64
	coldWorkers        int
	coldReadAhead      int
	coldBytesPerSecond int64
	coldGovernorTarget float64
	// coldClientBytesPerSecond is the per-client cold-read budget.
	coldClientBytesPerSecond int64
	// Replication (broker/replica.go, replication/replica and follower; controller).
	peerAddresses                 string
	leaseTTL                      time.Duration
	replicaLagTimeMax             time.Duration
	replicaFetchMaxWait           time.Duration
	defaultReplicationFactor      int
	offsetsTopicReplicationFactor int
	controlledShutdownTimeout     time.Duration
	leaderImbalanceCheckInterval  time.Duration
	reassignmentBytesPerSecond    int64
	autoBalance                   bool
	autoBalanceInterval           time.Duration
	autoBalanceMaxMoves           int
	// Idempotence and transactions (hotlog producer state, broker/txn).
	producerIDExpiration      time.Duration
	transactionalIDExpiration time.Duration
	transactionMaxTimeout     time.Duration
	transactionVersion        int
	// Log cleaner (compaction.Cleaner).
	cleanerEnable      bool
	cleanerDedupeBytes int64
	cleanerIORate      int64
	cleanerBackoff     time.Duration
	cleanerObjectGrace time.Duration
	// Security and transport limits (serve_security.go).
	security securityFlags
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.nodeID, "node-id", 1, "broker id, unique in the cluster")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9092", "Kafka listener `host:port` (port 0: any free port)")
	fs.StringVar(&f.advertise, "advertise", "", "`host:port` given to clients and peers in Metadata (default: the listen address)")
	fs.StringVar(&f.dataDir, "data-dir", "./strata-data", "local log and, in single-node mode, embedded etcd data (<data-dir>/etcd)")
	fs.StringVar(&f.etcd, "etcd", "", "comma-separated etcd `endpoints` of an external cluster (empty: run etcd embedded)")
	fs.StringVar(&f.cluster, "cluster", metadata.DefaultCluster, "cluster name: the etcd key prefix and the bucket prefix")
	fs.StringVar(&f.objectStore, "object-store", "", "`URL` of the bucket: file:///path or s3://bucket/prefix?endpoint=http://host:port&region=R\n"+
		"(default file://<data-dir>/objects). s3 URLs also take path-style, sse, sse-kms-key-id, part-size,\n"+
		"multipart-threshold, concurrency, credentials-file (an AWS shared-credentials file) and profile;\n"+
		"without credentials-file the standard AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, roles)")
	fs.StringVar(&f.durability, "durability", "fsync", "fsync (acknowledge acks=all writes after fdatasync, group-committed) or replication (page cache only, as Kafka)")
	fs.DurationVar(&f.flushInterval, "flush-interval", broker.DefaultFlushInterval,
		"with --durability fsync: while a partition's writes keep arriving, its flushes start this far apart and the writes between share one fdatasync; "+
			"a partition whose producer waits for each ack flushes at once. 0: flush as soon as the previous flush finished")
	fs.StringVar(&f.http, "http", "127.0.0.1:9644", "`host:port` serving /metrics, /healthz and /readyz")
	fs.StringVar(&f.advertiseHTTP, "advertise-http", "",
		"`host:port` where other brokers reach --http, registered in etcd for cluster-wide `strata tier status` "+
			"(default: the --http address, or the advertised Kafka host with the --http port when --http binds every interface)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go profiles on the --http address under /debug/pprof/")
	fs.StringVar(&f.rack, "rack", "", "rack id for replica placement")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text (slog key=value) or json (one object per line)")
	fs.BoolVar(&f.autoCreateTopics, "auto-create-topics", true, "create unknown topics on Metadata/Produce (auto.create.topics.enable)")
	fs.IntVar(&f.numPartitions, "num-partitions", 1, "partitions of auto-created topics (num.partitions)")
	fs.DurationVar(&f.retentionCheckInterval, "log-retention-check-interval", 30*time.Second, "how often retention runs (log.retention.check.interval.ms)")
	fs.DurationVar(&f.retentionWarnMargin, "retention-warn-margin", 6*time.Hour,
		"log a warning (rate-limited) when retention would delete the record at a consumer group's committed offset within this time (negative: never)")
	fs.DurationVar(&f.retentionHold, "retention-hold", 0,
		"the default of retention.hold.ms: how long past retention.ms the bucket keeps an object a consumer group still needs (0: no time bound; the hold is off when both bounds are 0)")
	fs.Int64Var(&f.retentionHoldBytes, "retention-hold-bytes", 0,
		"the default of retention.hold.bytes: most bytes of objects past retention the bucket keeps per partition for consumer groups (0: no byte bound)")
	fs.DurationVar(&f.consumerLagInterval, "consumer-lag-interval", 30*time.Second,
		"how often consumer-group lag and retention margins are recomputed for /metrics and the warning")
	fs.IntVar(&f.fetchSessionSlots, "max-incremental-fetch-session-cache-slots", 1000,
		"incremental fetch sessions kept (max.incremental.fetch.session.cache.slots; 0: none, every fetch is a full one)")
	fs.DurationVar(&f.groupInitialRebalanceDelay, "group-initial-rebalance-delay", 3*time.Second,
		"how long the first rebalance of an empty group waits for more members (group.initial.rebalance.delay.ms)")
	fs.IntVar(&f.offsetsTopicPartitions, "offsets-topic-num-partitions", 50,
		"partitions of __consumer_offsets when it is created (offsets.topic.num.partitions); never change it afterwards")
	fs.DurationVar(&f.offsetsRetention, "offsets-retention", 7*24*time.Hour,
		"how long committed offsets of an empty group are kept (offsets.retention.minutes)")
	fs.Int64Var(&f.tierUploadMaxLagBytes, "tier-upload-max-lag-bytes", 4<<30,
		"sealed bytes per partition not yet in the bucket past which producers are throttled (tier.upload.max.lag.bytes; -1: never)")
	fs.DurationVar(&f.tierUploadMaxLag, "tier-upload-max-lag", time.Minute,
		"longest time a committed record stays out of the bucket, for topics that do not set tier.upload.max.lag.ms (the bucket's recovery point; negative: no bound)")
	fs.DurationVar(&f.tierMergeInterval, "tier-merge-interval", time.Minute,
		"how often small objects in the bucket are merged into objects of up to segment.bytes (negative: never)")
	fs.DurationVar(&f.tierMergeGrace, "tier-merge-grace", 10*time.Minute,
		"age (by their newest record) before small objects are merged")
	fs.DurationVar(&f.tierOrphanGrace, "tier-orphan-grace", time.Hour,
		"age after which a bucket object absent from the manifest is deleted by the orphan sweeper")
	fs.DurationVar(&f.tierUploadInterval, "tier-upload-interval", time.Second,
		"how often partitions are checked for sealed segments to upload")
	fs.DurationVar(&f.tierSweepInterval, "tier-sweep-interval", 10*time.Minute,
		"how often the orphan sweeper lists the bucket")
	f.consumerGroups.register(fs)
	f.registerCold(fs)
	f.registerDiskless(fs)
	f.registerReplication(fs)
	f.registerTxn(fs)
	f.registerCleaner(fs)
	f.security.register(fs)
}

// registerCleaner registers the log cleaner flags.
func (f *serveFlags) registerCleaner(fs *flag.FlagSet) {
	fs.BoolVar(&f.cleanerEnable, "log-cleaner-enable", true, "compact cleanup.policy=compact topics (log.cleaner.enable)")
	fs.Int64Var(&f.cleanerDedupeBytes, "log-cleaner-dedupe-buffer-size", 128<<20,
		"memory of one cleaning pass's key→offset map, in bytes (log.cleaner.dedupe.buffer.size); a larger dirty range is cleaned in several passes")
	fs.Int64Var(&f.cleanerIORate, "log-cleaner-io-max-bytes-per-second", 0,
		"cap on the bytes the cleaner reads and writes per second (log.cleaner.io.max.bytes.per.second); 0: unlimited")
	fs.DurationVar(&f.cleanerBackoff, "log-cleaner-backoff", 15*time.Second,
		"pause of the cleaner when no partition needs cleaning (log.cleaner.backoff.ms)")
	fs.DurationVar(&f.cleanerObjectGrace, "log-cleaner-object-delete-grace", 5*time.Minute,
		"how long a bucket object replaced by tiered cleaning stays, so cold reads in flight finish")
}

// cleanerConfig validates the cleaner flags into cfg.
func (f *serveFlags) cleanerConfig(cfg *broker.Config) error {
	if f.cleanerDedupeBytes < 1<<10 || f.cleanerIORate < 0 || f.cleanerBackoff <= 0 || f.cleanerObjectGrace <= 0 {
		return usageErrorf("--log-cleaner-dedupe-buffer-size must be ≥ 1024, --log-cleaner-io-max-bytes-per-second ≥ 0, " +
			"--log-cleaner-backoff and --log-cleaner-object-delete-grace > 0")
	}
	cfg.Cleaner = compaction.CleanerConfig{Disable: !f.cleanerEnable, DedupeBufferBytes: f.cleanerDedupeBytes,
		IOBytesPerSecond: f.cleanerIORate, Backoff: f.cleanerBackoff, ObjectDeleteGrace: f.cleanerObjectGrace}
	return nil
}

// registerTxn registers the idempotence and transaction flags.
func (f *serveFlags) registerTxn(fs *flag.FlagSet) {
	fs.DurationVar(&f.producerIDExpiration, "producer-id-expiration", 24*time.Hour,
		"how long a partition remembers an idle producer id's sequences (producer.id.expiration.ms)")
	fs.DurationVar(&f.transactionalIDExpiration, "transactional-id-expiration", 7*24*time.Hour,
		"how long the coordinator keeps an idle transactional id (transactional.id.expiration.ms)")
	fs.DurationVar(&f.transactionMaxTimeout, "transaction-max-timeout", 15*time.Minute,
		"largest transaction.timeout.ms a producer may ask for (transaction.max.timeout.ms)")
	fs.IntVar(&f.transactionVersion, "transaction-version", 2,
		"transaction.version feature level a new cluster starts with (later: UpdateFeatures): 2 (KIP-890 part 2: implicit partition adds, epoch bump per transaction) or 1")
}

// txnConfig validates the transaction flags into cfg.
func (f *serveFlags) txnConfig(cfg *broker.Config) error {
	switch {
	case f.producerIDExpiration <= 0 || f.transactionalIDExpiration <= 0 || f.transactionMaxTimeout <= 0:
		return usageErrorf("--producer-id-expiration, --transactional-id-expiration and --transaction-max-timeout must be > 0")
	case f.transactionVersion < 1 || f.transactionVersion > 2:
		return usageErrorf("--transaction-version %d: want 1 or 2", f.transactionVersion)
	}
	cfg.ProducerIDExpiration = f.producerIDExpiration
	cfg.TransactionVersion = int16(f.transactionVersion)
	cfg.Txn.Expiration = f.transactionalIDExpiration
	cfg.Txn.MaxTimeout = f.transactionMaxTimeout
	return nil
}

// registerReplication registers the cluster and replication flags.
func (f *serveFlags) registerReplication(fs *flag.FlagSet) {
	fs.StringVar(&f.peerAddresses, "peer-address", "",
		"comma-separated `id=host:port` overrides for reaching other brokers (default: their advertised address)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second,
		"TTL of the broker's etcd registration lease; a broker cut off from etcd stops leading after 2/3 of it")
	fs.DurationVar(&f.replicaLagTimeMax, "replica-lag-time-max", 30*time.Second,
		"a follower not caught up for this long leaves the ISR (replica.lag.time.max.ms)")
	fs.DurationVar(&f.replicaFetchMaxWait, "replica-fetch-wait-max", 500*time.Millisecond,
		"long-poll of a follower's fetch (replica.fetch.wait.max.ms)")
	fs.IntVar(&f.defaultReplicationFactor, "default-replication-factor", 1,
		"replication factor of auto-created topics and CreateTopics with -1 (default.replication.factor)")
	fs.IntVar(&f.offsetsTopicReplicationFactor, "offsets-topic-replication-factor", 3,
		"replication factor of __consumer_offsets, capped by the live brokers (offsets.topic.replication.factor)")
	fs.DurationVar(&f.controlledShutdownTimeout, "controlled-shutdown-timeout", 30*time.Second,
		"how long SIGTERM waits for leadership to move to other brokers before exiting")
	fs.Int64Var(&f.reassignmentBytesPerSecond, "reassignment-bytes-per-second", 0,
		"bytes per second a leader serves to replicas being added by partition moves, so moves never starve live followers\n"+
			"(the default of the dynamic leader.replication.throttled.rate / follower.replication.throttled.rate; 0: unlimited)")
	fs.DurationVar(&f.leaderImbalanceCheckInterval, "leader-imbalance-check-interval", 5*time.Minute,
		"how often leadership moves back to preferred replicas after failovers (leader.imbalance.check.interval.seconds; 0: never)")
	fs.BoolVar(&f.autoBalance, "auto-balance", false,
		"the controller balances replicas and preferred leaderships over the brokers itself, as 'strata cluster balance' does\n"+
			"(set it on every broker: whichever is elected controller acts on its own flags)")
	fs.DurationVar(&f.autoBalanceInterval, "auto-balance-interval", 5*time.Minute,
		"with --auto-balance, how often the controller checks the balance and begins moves")
	fs.IntVar(&f.autoBalanceMaxMoves, "auto-balance-max-moves", controller.DefaultAutoBalanceMaxMoves,
		"with --auto-balance, the most partition moves one check begins")
}

// replicationConfig validates the replication flags into cfg.
func (f *serveFlags) replicationConfig(cfg *broker.Config) error {
	switch {
	case f.leaseTTL < time.Second:
		return usageErrorf("--lease-ttl %s: want ≥ 1s", f.leaseTTL)
	case f.reassignmentBytesPerSecond < 0:
		return usageErrorf("--reassignment-bytes-per-second %d: want ≥ 0 (0: unlimited)", f.reassignmentBytesPerSecond)
	case f.leaderImbalanceCheckInterval < 0:
		return usageErrorf("--leader-imbalance-check-interval %s: want ≥ 0 (0: never)", f.leaderImbalanceCheckInterval)
	case f.autoBalanceInterval <= 0 || f.autoBalanceMaxMoves < 1:
		return usageErrorf("--auto-balance-interval %s and --auto-balance-max-moves %d: want > 0", f.autoBalanceInterval, f.autoBalanceMaxMoves)
	case f.replicaLagTimeMax <= 0 || f.replicaFetchMaxWait <= 0 || f.controlledShutdownTimeout <= 0:
		return usageErrorf("--replica-lag-time-max, --replica-fetch-wait-max and --controlled-shutdown-timeout must be > 0")
	case f.defaultReplicationFactor < 1 || f.defaultReplicationFactor > 32767,
		f.offsetsTopicReplicationFactor < 1 || f.offsetsTopicReplicationFactor > 32767:
		return usageErrorf("--default-replication-factor and --offsets-topic-replication-factor must be ≥ 1")
	}
	peers, err := parsePeerAddresses(f.peerAddresses)
	if err != nil {
		return err
	}
	cfg.PeerAddresses = peers
	cfg.RegistrationTTL = int64((f.leaseTTL + time.Second - 1) / time.Second)
	cfg.ReplicaLagTimeMax = f.replicaLagTimeMax
	cfg.ReplicaFetchMaxWait = f.replicaFetchMaxWait
	cfg.DefaultReplicationFactor = int16(f.defaultReplicationFactor)
	cfg.OffsetsTopicReplicationFactor = int16(f.offsetsTopicReplicationFactor)
	cfg.ControlledShutdownTimeout = f.controlledShutdownTimeout
	cfg.ReassignmentBytesPerSecond = f.reassignmentBytesPerSecond
	cfg.LeaderRebalanceInterval = f.leaderImbalanceCheckInterval
	if f.leaderImbalanceCheckInterval == 0 {
		cfg.LeaderRebalanceInterval = -1 // 0 means "default" in broker.Config
	}
	if f.autoBalance {
		cfg.AutoBalanceInterval, cfg.AutoBalanceMaxMoves = f.autoBalanceInterval, f.autoBalanceMaxMoves
	}
	return nil
}

// parsePeerAddresses parses "2=127.0.0.1:9093,3=host:9094".
func parsePeerAddresses(s string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, item := range splitList(s) {
		id, addr, ok := strings.Cut(item, "=")
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, usageErrorf("--peer-address %q: want id=host:port", item)
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, usageErrorf("--peer-address %q: want id=host:port", item)
		}
		out[int32(n)] = addr
	}
	return out, nil
}

// registerDiskless registers the flags of diskless topics; defaults are
// diskless's (KIP-1150's diskless.append.* names).
func (f *serveFlags) registerDiskless(fs *flag.FlagSet) {
	fs.DurationVar(&f.disklessLinger, "diskless-append-linger", diskless.DefaultLinger,
		"diskless topics: how long a produced batch waits for others before the broker writes them as one shared object (diskless.append.linger.ms)")
	fs.IntVar(&f.disklessMaxBytes, "diskless-append-max-bytes", diskless.DefaultMaxBytes,
		"diskless topics: the shared object is written at once when the buffered batches reach this size (diskless.append.max.bytes)")
	fs.Int64Var(&f.disklessCacheBytes, "diskless-cache-bytes", diskless.DefaultCacheBytes,
		"diskless topics: bytes of whole shared objects the broker caches for fetches (one GET feeds every partition in an object)")
	fs.DurationVar(&f.disklessMergeAge, "diskless-merge-age", diskless.DefaultMergeAge,
		"diskless topics: batches committed this long ago are merged from shared objects into ordinary per-partition segment objects")
	fs.DurationVar(&f.disklessMergeEvery, "diskless-merge-interval", diskless.DefaultMergeInterval,
		"diskless topics: how often a broker merges the partitions it fronts and sweeps unreferenced shared objects")
}

// registerCold registers the cold reader's flags; defaults are tier's.
func (f *serveFlags) registerCold(fs *flag.FlagSet) {
	fs.Int64Var(&f.coldCacheBytes, "cold-cache-bytes", tier.DefaultColdCacheBytes,
		"bytes of bucket blocks the cold reader caches (LRU; at least 2 × --cold-fetch-size)")
	fs.Int64Var(&f.coldFetchSize, "cold-fetch-size", tier.DefaultColdFetchSize,
		"bytes per ranged GET of the cold reader (rounded down to whole chunks of the object; at least 65536)")
	fs.IntVar(&f.coldWorkers, "cold-workers", tier.DefaultColdWorkers,
		"cold reader GETs in flight (its own pool, separate from the hot path)")
	fs.IntVar(&f.coldReadAhead, "cold-read-ahead", tier.DefaultColdReadAhead,
		"blocks fetched ahead of a sequential cold reader (0: no read-ahead)")
	fs.Int64Var(&f.coldClientBytesPerSecond, "cold-read-client-bytes-per-second", 0,
		"cold-read budget of each client (user and client id): bucket bytes beyond this rate throttle its cold reads (0: off)")
	fs.Int64Var(&f.coldBytesPerSecond, "cold-bytes-per-second", 0,
		"cap on the cold reader's GET byte rate (0: unlimited)")
	fs.Float64Var(&f.coldGovernorTarget, "cold-governor-target", tier.DefaultGovernorTarget,
		"while hot requests run, the cold-read governor slows cold reads until the broker's threads wait at most this many seconds per second for a CPU (0: governor off)")
}

// envName is the environment variable that can set a flag:
// --data-dir → STRATA_DATA_DIR.
func envName(flagName string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag whose STRATA_<NAME> variable is non-empty, so
// that the command line (parsed afterwards) overrides the environment,
// which overrides the defaults.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v := getenv(name); v != "" && err == nil {
			if setErr := fs.Set(f.Name, v); setErr != nil {
				err = usageErrorf("%s=%q: %v", name, v, setErr)
			}
		}
	})
	return err
}

// serveConfig is the validated result of `strata serve`'s flags.
type serveConfig struct {
	dataDir string
	// etcdEndpoints is empty in single-node mode: run etcd embedded.
	etcdEndpoints []string
	embedded      metadata.EmbeddedConfig
	metadata      metadata.Config
	broker        broker.Config
	objectStore   objectStoreURL
	// objectStoreRaw is the --object-store URL as given (or the default),
	// opened with tier.OpenURL; it may hold a secret, never log it.
	objectStoreRaw string
	durabilityName string // as given: "fsync" or "replication"
	http           string
	// advertiseHTTP is --advertise-http ("": derived from the bound
	// --http address by httpAdvertisement once it is bound).
	advertiseHTTP string
	pprof         bool // --pprof: /debug/pprof/ on the http address
	logLevel      slog.Level
	logJSON       bool
	// saslBootstrapUsers is the --sasl-bootstrap-users file ("": none).
	saslBootstrapUsers string
}

// parseServe parses args and the environment into a validated config.
// Loggers are left nil; the caller sets them once it built the handler.
func parseServe(args []string, getenv func(string) string, usage *flag.FlagSet) (serveConfig, error) {
	var f serveFlags
	f.register(usage)
	if err := applyEnv(usage, getenv); err != nil {
		return serveConfig{}, err
	}
	positional, err := parseArgs(usage, args)
	if err != nil {
		return serveConfig{}, err
	}
	if len(positional) > 0 {
		return serveConfig{}, usageErrorf("unexpected arguments %q", positional)
	}
	return f.resolve()
}

func (f *serveFlags) resolve() (serveConfig, error) {
	cfg := serveConfig{http: f.http, advertiseHTTP: f.advertiseHTTP, pprof: f.pprof, etcdEndpoints: splitList(f.etcd), durabilityName: f.durability}
	var err error
	if f.dataDir == "" {
		return cfg, usageErrorf("--data-dir is empty")
	}
	if cfg.dataDir, err = filepath.Abs(f.dataDir); err != nil {
		return cfg, usageErrorf("--data-dir %q: %v", f.dataDir, err)
	}
	if cfg.logLevel, err = parseLogLevel(f.logLevel); err != nil {
		return cfg, err
	}
	switch f.logFormat {
	case "text":
	case "json":
		cfg.logJSON = true
	default:
		return cfg, usageErrorf("--log-format %q: want text or json", f.logFormat)
	}
	durability, err := parseDurability(f.durability)
	if err != nil {
		return cfg, err
	}
	if f.flushInterval < 0 {
		return cfg, usageErrorf("--flush-interval %v: want ≥ 0", f.flushInterval)
	}
	if err := f.checkAddresses(); err != nil {
		return cfg, err
	}
	rawStore := f.objectStore
	if rawStore == "" {
		rawStore = "file://" + filepath.Join(cfg.dataDir, "objects")
	}
	if cfg.objectStore, err = parseObjectStore(rawStore); err != nil {
		return cfg, err
	}
	cfg.objectStoreRaw = rawStore
	if f.tierUploadMaxLagBytes < -1 || f.tierUploadMaxLagBytes == 0 || f.tierOrphanGrace <= 0 || f.tierUploadInterval <= 0 ||
		f.tierSweepInterval <= 0 {
		return cfg, usageErrorf("--tier-upload-max-lag-bytes must be > 0 or -1; --tier-orphan-grace, --tier-upload-interval and --tier-sweep-interval > 0")
	}
	if f.tierMergeInterval == 0 || f.tierMergeGrace <= 0 {
		return cfg, usageErrorf("--tier-merge-interval must not be 0 (negative: never merge); --tier-merge-grace must be > 0")
	}
	if f.tierUploadMaxLag >= 0 && f.tierUploadMaxLag < time.Second {
		return cfg, usageErrorf("--tier-upload-max-lag %v: want at least 1s, or a negative value for no bound", f.tierUploadMaxLag)
	}
	if f.nodeID < 0 || f.nodeID > 1<<31-1 {
		return cfg, usageErrorf("--node-id %d: want 0..2147483647", f.nodeID)
	}
	if f.numPartitions < 1 || f.numPartitions > 1<<31-1 {
		return cfg, usageErrorf("--num-partitions %d: want ≥ 1", f.numPartitions)
	}
	if f.retentionCheckInterval <= 0 {
		return cfg, usageErrorf("--log-retention-check-interval %s: want > 0", f.retentionCheckInterval)
	}
	if f.retentionHold < 0 {
		return cfg, usageErrorf("--retention-hold %s: want ≥ 0 (0: off)", f.retentionHold)
	}
	if f.retentionHoldBytes < 0 {
		return cfg, usageErrorf("--retention-hold-bytes %d: want ≥ 0 (0: off)", f.retentionHoldBytes)
	}
	if f.consumerLagInterval <= 0 {
		return cfg, usageErrorf("--consumer-lag-interval %s: want > 0", f.consumerLagInterval)
	}
	if f.fetchSessionSlots < 0 {
		return cfg, usageErrorf("--max-incremental-fetch-session-cache-slots %d: want ≥ 0", f.fetchSessionSlots)
	}
	if err := f.checkGroupFlags(); err != nil {
		return cfg, err
	}
	cold, err := f.coldConfig()
	if err != nil {
		return cfg, err
	}
	cfg.embedded = metadata.EmbeddedConfig{Dir: filepath.Join(cfg.dataDir, "etcd")}
	cfg.metadata = metadata.Config{Endpoints: cfg.etcdEndpoints, Cluster: f.cluster}
	// Check the cluster name now (a usage error) rather than at Open; the
	// endpoint list is only known after embedded etcd started.
	if err := (metadata.Config{Endpoints: []string{"unused"}, Cluster: f.cluster}).Validate(); err != nil {
		return cfg, usageErrorf("--cluster: %v", err)
	}
	cfg.broker = broker.Config{
		NodeID:                  int32(f.nodeID),
		Listen:                  f.listen,
		Advertise:               f.advertise,
		Rack:                    f.rack,
		DataDir:                 cfg.dataDir,
		Durability:              durability,
		FlushInterval:           f.flushInterval,
		DisableAutoCreateTopics: !f.autoCreateTopics,
		DefaultPartitions:       int32(f.numPartitions),
		RetentionCheckInterval:  f.retentionCheckInterval,
		FetchSessionCacheSlots:  fetchSessionCacheSlots(f.fetchSessionSlots),
		ConsumerLagInterval:     f.consumerLagInterval,
		RetentionWarnMargin:     f.retentionWarnMargin,
		Group: group.Config{
			OffsetsTopicPartitions: int32(f.offsetsTopicPartitions),
			InitialRebalanceDelay:  f.groupInitialRebalanceDelay,
			OffsetsRetention:       f.offsetsRetention,
		},
		Tier: broker.TierConfig{
			MaxUploadLagBytes:  f.tierUploadMaxLagBytes,
			UploadMaxLag:       f.tierUploadMaxLag,
			MergeInterval:      f.tierMergeInterval,
			MergeGrace:         f.tierMergeGrace,
			OrphanGrace:        f.tierOrphanGrace,
			UploadInterval:     f.tierUploadInterval,
			SweepInterval:      f.tierSweepInterval,
			RetentionHold:      f.retentionHold,
			RetentionHoldBytes: f.retentionHoldBytes,
		},
		Cold: cold,
		Diskless: broker.DisklessConfig{
			Linger: f.disklessLinger, MaxBytes: f.disklessMaxBytes, CacheBytes: f.disklessCacheBytes,
			MergeAge: f.disklessMergeAge, MergeInterval: f.disklessMergeEvery,
		},
	}
	if f.disklessLinger <= 0 || f.disklessMaxBytes <= 0 || f.disklessCacheBytes <= 0 || f.disklessMergeAge <= 0 || f.disklessMergeEvery <= 0 {
		return cfg, usageErrorf("--diskless-append-linger, --diskless-append-max-bytes, --diskless-cache-bytes, --diskless-merge-age, --diskless-merge-interval: want each > 0")
	}
	if err := f.replicationConfig(&cfg.broker); err != nil {
		return cfg, err
	}
	if err := f.txnConfig(&cfg.broker); err != nil {
		return cfg, err
	}
	if err := f.cleanerConfig(&cfg.broker); err != nil {
		return cfg, err
	}
	if err := f.security.resolve(&cfg.broker, f.advertise); err != nil {
		return cfg, err
	}
	cfg.saslBootstrapUsers = f.security.saslBootstrapUsers
	if cfg.broker.Group.Consumer, err = f.consumerGroups.config(); err != nil {
		return cfg, err
	}
	if f.groupInitialRebalanceDelay == 0 {
		cfg.broker.Group.InitialRebalanceDelay = -1 // 0 means "default" in group.Config
	}
	return cfg, nil
}

// checkGroupFlags validates the consumer-group flags.
func (f *serveFlags) checkGroupFlags() error {
	switch {
	case f.groupInitialRebalanceDelay < 0:
		return usageErrorf("--group-initial-rebalance-delay %s: want ≥ 0", f.groupInitialRebalanceDelay)
	case f.offsetsTopicPartitions < 1 || f.offsetsTopicPartitions > 10_000:
		return usageErrorf("--offsets-topic-num-partitions %d: want 1..10000", f.offsetsTopicPartitions)
	case f.offsetsRetention <= 0:
		return usageErrorf("--offsets-retention %s: want > 0", f.offsetsRetention)
	}
	return nil
}

// coldConfig validates the cold reader's flags. Zero means "default" in
// tier.ColdConfig, so a zero size or worker count is rejected here rather
// than silently replaced, and --cold-read-ahead 0 maps to ReadAhead -1 (off).
func (f *serveFlags) coldConfig() (tier.ColdConfig, error) {
	switch {
	case f.coldCacheBytes <= 0:
		return tier.ColdConfig{}, usageErrorf("--cold-cache-bytes %d: want > 0", f.coldCacheBytes)
	case f.coldFetchSize <= 0:
		return tier.ColdConfig{}, usageErrorf("--cold-fetch-size %d: want > 0", f.coldFetchSize)
	case f.coldWorkers <= 0:
		return tier.ColdConfig{}, usageErrorf("--cold-workers %d: want > 0", f.coldWorkers)
	case f.coldReadAhead < 0:
		return tier.ColdConfig{}, usageErrorf("--cold-read-ahead %d: want ≥ 0", f.coldReadAhead)
	case f.coldClientBytesPerSecond < 0:
		return tier.ColdConfig{}, usageErrorf("--cold-read-client-bytes-per-second %d: want ≥ 0 (0: off)", f.coldClientBytesPerSecond)
	case f.coldBytesPerSecond < 0:
		return tier.ColdConfig{}, usageErrorf("--cold-bytes-per-second %d: want ≥ 0 (0: unlimited)", f.coldBytesPerSecond)
	case f.coldGovernorTarget < 0:
		return tier.ColdConfig{}, usageErrorf("--cold-governor-target %g: want ≥ 0 (0: off)", f.coldGovernorTarget)
	}
	c := tier.ColdConfig{
		CacheBytes:     f.coldCacheBytes,
		FetchSize:      f.coldFetchSize,
		Workers:        f.coldWorkers,
		ReadAhead:      f.coldReadAhead,
		BytesPerSecond: f.coldBytesPerSecond,

		ClientBytesPerSecond: f.coldClientBytesPerSecond,
		Governor:             tier.GovernorConfig{Target: f.coldGovernorTarget},
	}
	if f.coldGovernorTarget == 0 {
		c.Governor.Target = -1 // off
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = -1
	}
	if err := c.Validate(); err != nil {
		return tier.ColdConfig{}, usageErrorf("--cold-cache-bytes/--cold-fetch-size: %v", err)
	}
	return c, nil
}

// httpAdvertisement is the HTTP address the broker registers for its
// peers: --advertise-http when given, else the --http host with the bound
// port (port 0 picks one). A host that binds every interface (or none) is
// no address to reach, so it is left empty and the broker fills in its
// advertised Kafka host (broker.Config.AdvertiseHTTP).
func httpAdvertisement(advertiseHTTP, httpFlag string, bound net.Addr) string {
	if advertiseHTTP != "" {
		return advertiseHTTP
	}
	host, _, err := net.SplitHostPort(httpFlag)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, port)
}

// checkAddresses validates --listen, --advertise, --advertise-http, --http
// and --etcd.
func (f *serveFlags) checkAddresses() error {
	checks := []struct{ flag, value string }{{"listen", f.listen}, {"http", f.http}}
	for _, c := range []struct{ flag, value string }{{"advertise", f.advertise}, {"advertise-http", f.advertiseHTTP}} {
		if c.value != "" {
			checks = append(checks, c)
		}
	}
	for _, c := range checks {
		if _, port, err := net.SplitHostPort(c.value); err != nil || port == "" {
			return usageErrorf("--%s %q: want host:port", c.flag, c.value)
		}
	}
	if host, port, _ := net.SplitHostPort(f.advertise); f.advertise != "" && (host == "" || port == "0") {
		return usageErrorf("--advertise %q: clients need a concrete host and port", f.advertise)
	}
	if host, port, _ := net.SplitHostPort(f.advertiseHTTP); f.advertiseHTTP != "" && (host == "" || port == "0") {
		return usageErrorf("--advertise-http %q: other brokers need a concrete host and port", f.advertiseHTTP)
	}
	if strings.TrimSpace(f.etcd) != "" && len(splitList(f.etcd)) == 0 {
		return usageErrorf("--etcd %q: no endpoints", f.etcd)
	}
	return nil
}

func parseDurability(s string) (hotlog.Durability, error) {
	switch s {
	case "fsync":
		return hotlog.DurabilityFsync, nil
	case "replication":
		return hotlog.DurabilityReplication, nil
	}
	return 0, usageErrorf("--durability %q: want fsync or replication", s)
}

func parseLogLevel(s string) (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return 0, usageErrorf("--log-level %q: want debug, info, warn or error", s)
	}
	return level, nil
}

// objectStoreURL is a validated --object-store (for logs and checks);
// serve opens the raw URL with tier.OpenURL.
type objectStoreURL struct {
	Scheme string // "file" or "s3"
	// Path is the directory of a file store.
	Path string
	// Bucket, Prefix, Endpoint and Region describe an S3 store.
	Bucket, Prefix, Endpoint, Region string
}

func (o objectStoreURL) String() string {
	if o.Scheme == "file" {
		return "file://" + o.Path
	}
	return fmt.Sprintf("s3://%s/%s (endpoint %q, region %q)", o.Bucket, o.Prefix, o.Endpoint, o.Region)
}

// redactedURL is raw without secrets, for messages (never the raw text:
// a refused URL may hold keys).
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return tier.Redact(u)
}

// parseObjectStore accepts file:///absolute/path and
// s3://bucket[/prefix][?endpoint=http(s)://host:port&region=R].
func parseObjectStore(raw string) (objectStoreURL, error) {
	bad := func(why string) (objectStoreURL, error) {
		return objectStoreURL{}, usageErrorf("--object-store %q: %s", redactedURL(raw), why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(err.Error())
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("want file:///absolute/path (three slashes)")
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
			return bad("want file:///absolute/path with no query")
		}
		return objectStoreURL{Scheme: "file", Path: filepath.Clean(u.Path)}, nil
	case "s3":
		return parseS3(u, bad)
	}
	return bad("scheme must be file:// or s3://")
}

func parseS3(u *url.URL, bad func(string) (objectStoreURL, error)) (objectStoreURL, error) {
	if u.Host == "" {
		return bad("missing bucket: want s3://bucket/prefix")
	}
	if u.User != nil {
		return bad("credentials do not belong in the URL: they come from the AWS chain")
	}
	o := objectStoreURL{Scheme: "s3", Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	for key, values := range u.Query() {
		switch key {
		case "endpoint":
			o.Endpoint = values[0]
			ep, err := url.Parse(o.Endpoint)
			if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
				return bad("endpoint must be an http:// or https:// URL with a host")
			}
		case "region":
			o.Region = values[0]
		case "path-style", "sse", "sse-kms-key-id", "part-size", "multipart-threshold", "concurrency",
			"credentials-file", "profile":
			// Checked by tier.OpenURL at start.
		case "access-key", "secret-key":
			return bad("keys do not belong in the URL: use credentials-file=PATH or the AWS chain " +
				"(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
		default:
			return bad(fmt.Sprintf("unknown parameter %q (known: endpoint, region, path-style, sse, "+
				"sse-kms-key-id, part-size, multipart-threshold, concurrency, credentials-file, profile)", key))
		}
	}
	return o, nil
}

// fetchSessionCacheSlots maps the flag (0: no sessions, as Kafka's
// max.incremental.fetch.session.cache.slots=0) to broker.Config (0 there
// is the default, negative none).
func fetchSessionCacheSlots(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}
