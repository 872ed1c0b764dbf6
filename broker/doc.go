// Package broker is Strata's Kafka front door: the listeners, each
// connection's session (identity, routing to handlers; conn.go) over
// broker/wire, which runs the connections and their SASL exchange, the
// API registry (apis.go: one row per API key with
// its versions, handler and per-API facts; ApiVersions and the dispatcher
// both read it) over one handler file per key, named <key>_<api>.go, and
// the partition manager that mirrors the cluster metadata into open local
// logs.
//
// # Wire framing
//
// Frames, request headers, the response order, the connection limits and
// the connection loop itself are package broker/wire's; its doc draws the
// formats. wire.Server accepts and drains the connections; for each, the
// broker supplies a wire.Session (conn.go) that decides how a request is
// served and runs its handler from the API registry (apis.go).
//
// # Errors
//
// Kafka errors go inside responses. A handler returning a Go error, an
// undecodable request, an unknown API key or an unsupported version (other
// than ApiVersions, which is answered with UNSUPPORTED_VERSION at v0) closes
// the connection, as Kafka does. A panicking handler is recovered, logged,
// and closes its connection only.
//
// # Ordering and concurrency
//
// The requests of one connection take effect in the order they were sent,
// as in Kafka: the reader reads ahead and appends a slot per request to an
// ordered queue, but each handler starts only after the previous request's
// handler released its turn (wire.Turns), and the writer writes the
// responses strictly in request order, waiting on each slot in turn. A
// handler releases its turn when it returns, or earlier through
// requestContext.releaseOrder once all its effects have happened and only
// a wait remains: Produce and WriteTxnMarkers after their appends, so
// pipelined acks=-1 waits overlap. A long-poll Fetch holds its
// connection's turn while it waits, as in Kafka (clients fetch on a
// connection of their own). Produce requests with acks=0 still take a slot
// (so ordering stays right) but the slot carries no bytes.
//
// The queue's capacity (Config.MaxInFlightRequests) bounds the requests in
// flight per connection: the reader stops reading while it is full.
//
// # Partition registry
//
// The partition registry (partitionManager, partitions*.go) keeps an
// in-memory mirror of every topic in metadata (topic, partition states) and
// an open hotlog.Log with its replica for every partition whose replica
// list holds this node, in the data directory's <topic>-<partition>/
// (layout, partition.metadata and stray-directory rules: broker/datadir).
// What it needs from the rest of the broker is explicit (registryDeps): the
// replica shell's wiring (replicaDriver) and the coordinators' hooks for
// their internal topics (coordinatorHooks).
//
// The mirror is updated by the metadata watch and, for read-your-writes, by
// the admin handlers right after their own etcd write; updates are
// idempotent and ordered by the topic's etcd revision, and topic ids deleted
// by this broker are remembered so a late watch event cannot resurrect them.
//
// Lock order: Broker.parts.mu before partitionState.mu. Neither is held
// across etcd calls or log I/O other than Open/Close/Reconfigure of a log
// in the manager.
//
// # Consumer groups
//
// The group APIs (08-16, 42, 47) are thin: they translate kmsg requests for
// the coordinator in broker/group, which owns the protocol and the records
// in __consumer_offsets (see its doc.go). groups.go and
// coordinator_wiring.go wire it in: the partition manager tells it which
// partitions of __consumer_offsets this node leads (BecomeLeader/Resign,
// on open and on every partition state change), a coordinatorLog adapter
// gives it those partitions' logs, deleted topics lose their offsets, and
// FindCoordinator creates the topic on first use. Shutdown resigns the coordinator before draining connections, so a
// JoinGroup waiting for a rebalance does not hold up the drain.
//
// Full lock order: Broker.parts.mu → the coordinator's lock →
// partitionState.mu and the hotlog's locks. The coordinator never calls
// into the broker while holding its lock.
//
// # Tiering (package tier; tier_wiring.go, cold_wiring.go)
//
// With Config.ObjectStore set (cmd: --object-store), partitions of topics
// with remote.storage.enable=true (any cleanup.policy) keep only a hot
// tail locally; history lives in the bucket, indexed by the tier manifest
// in etcd (metadata/tier.go) and mirrored in memory by one tier.Manifest
// per broker, fed by the watch loop, snapshots and the uploader's own
// commits. The uploader, retention across tiers, the orphan sweeper, the
// merge pass and the upload-lag bound are tier.Service (tier/doc.go,
// "Tiering service"); the broker builds it over adapters of its partition
// registry (tierPartition, tierRegistry, tierCleaning), runs it for its
// lifetime, calls it from retentionLoop, Produce (upload-lag throttling)
// and DeleteRecords, and answers `strata tier status` and `tier verify`
// from it. Reads below the local log start go through tier.ColdSource
// (cold_wiring.go adds the per-client cold-read budget, a client quota).
//
// Internal topics: __consumer_offsets is tiered whenever a bucket is
// configured (remote.storage.enable does not matter), so the history of
// commits is in the bucket for `strata restore --as-of`; but it keeps its
// untiered local retention (none: it is compacted; keepsLocalLog), because
// the group coordinator loads from the local log, and the bucket cleaner
// skips it (restore needs the uncleaned history). The local cleaner still
// cleans it, up to what is tiered (firstUncleanable). __transaction_state
// is never tiered.
//
// Leader restart at the tiered end (replication/follower's
// PrepareLeaderRestart and RestartBeforeLeading, run by the leadership
// adapter in replica_state.go): a replica about to lead whose local log
// ends below the end of the manifest's gap-free run (an empty disk after a
// restore or a disk loss) first restarts its log empty at that end, with
// the producer state of the object ending there
// (tier.ColdSource.ProducerSnapshot), then becomes leader: new records get
// offsets from that end on, and everything below it is served from the
// bucket.
//
// Log start across tiers: partition.logStartOffset() = max(tiered log
// start, min(first tiered offset, hot log start))
// (tier.Manifest.LogStartAcrossTiers).
package broker
