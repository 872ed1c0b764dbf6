// Package broker is Strata's Kafka front door: the listener, one reader and
// one writer goroutine per connection, request framing, header and body
// decoding with kmsg, the dispatch table (one file per API key, named
// <key>_<api>.go), and the partition manager that mirrors the cluster
// metadata into open local logs.
//
// # Wire framing
//
// Every request and response is a frame:
//
//	+----------------+------------------------------+
//	| size int32 (BE)| size bytes: header + body    |
//	+----------------+------------------------------+
//
// A request frame whose size is below minRequestHeaderBytes (10) or above
// Config.SocketRequestMaxBytes closes the connection before anything is
// allocated for it.
//
// Request header (v1, and v2 for flexible versions of the API):
//
//	api_key int16 | api_version int16 | correlation_id int32 |
//	client_id nullable string (int16 length, -1 = null)      |
//	[v2 only] tagged fields (uvarint count, then per field:
//	          uvarint tag, uvarint size, size bytes)
//
// The body follows and is decoded by the kmsg request type for the key at
// that version. Response header: correlation_id int32, plus an empty tagged
// field section (one 0x00 byte) when the response version is flexible,
// except for ApiVersions, whose response header is always v0 so that a
// client can parse it before it knows which versions the broker speaks.
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
// handler released its turn (conn.dispatch), and the writer writes the
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
// # Partition manager
//
// The broker keeps an in-memory mirror of every topic in metadata (topic,
// partition states) and an open hotlog.Log for every partition whose replica
// list holds this node, in <DataDir>/<topic>-<partition>/. Each such
// directory also holds partition.metadata (as Kafka):
//
//	version: 0
//	topic_id: <topic id, base64 URL encoding without padding>
//
// so that a directory left by a deleted topic is never served as a new topic
// of the same name: on start, directories of topics not in metadata, or
// whose topic id differs, are deleted.
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
// in __consumer_offsets (see its doc.go). groups.go wires it in: the
// partition manager tells it which partitions of __consumer_offsets this
// node leads (BecomeLeader/Resign, on open and on every partition state
// change), an offsetsLog adapter gives it those partitions' logs, deleted
// topics lose their offsets, and FindCoordinator creates the topic on first
// use. Shutdown resigns the coordinator before draining connections, so a
// JoinGroup waiting for a rebalance does not hold up the drain.
//
// Full lock order: Broker.parts.mu → the coordinator's lock →
// partitionState.mu and the hotlog's locks. The coordinator never calls
// into the broker while holding its lock.
//
// # Tiering (tiering*.go, DESIGN.md §5)
//
// With Config.ObjectStore set (cmd: --object-store), partitions of topics
// with remote.storage.enable=true (any cleanup.policy) keep only a hot
// tail locally; history lives in the bucket, indexed by the tier manifest
// in etcd (metadata/tier.go) and mirrored in memory by one tier.Manifest
// per broker, fed by the watch loop, snapshots and the uploader's own
// commits. Two tier goroutines run: tierLoop (the uploader; it refreshes
// upload lags and starts uploads in goroutines of their own, never doing
// object-store I/O itself) and tierJanitorLoop (due object deletes, the
// orphan sweeper and the merge pass of small objects, tiering_merge.go):
//
//   - the uploader, every Tier.UploadInterval, for the partitions this
//     node leads: first the active segments that tier.upload.max.lag.ms
//     says are due are rolled (tiering_bound.go); then each sealed, non-empty segment wholly below the HW and
//     LSO that the manifest does not cover, in offset order, is encoded
//     (tier.EncodeSegmentObject over an open fd of the .log, so retention
//     cannot pull it away), Put under a fresh key (multipart and part
//     retries in the s3 backend, transient retries in objstore.Retrying),
//     verified (HEAD + footer read back equal to what was encoded), then
//     committed with metadata.CommitTierEntry (create-if-absent CAS). A
//     partition stops at its first failure, so its manifest never has a
//     gap, and retries later with exponential backoff (Tier.RetryBackoff
//     .. MaxRetryBackoff). A commit that reports ErrTierEntryExists (an
//     earlier attempt committed but its answer was lost) adopts the
//     committed entry when it covers the same offsets and deletes the new
//     object. topic.json is written before a topic's first upload and
//     after each config change.
//   - remote-object deletes that are due (Tier.ObjectDeleteDelay after
//     their manifest entry went, so cold readers in flight finish);
//   - the orphan sweeper, every Tier.SweepInterval: objects under
//     <cluster>/topics/ that no manifest entry names (checked again in etcd)
//     and older than Tier.OrphanGrace are deleted, as are topic.json files
//     of deleted topics — but only objects of a topic id etcd has live or
//     records as deleted (metadata deleted-topics/<id>, TopicIDKnown): an
//     id etcd does not know is an index lost or not yet rebuilt by
//     `strata restore`, and its objects are kept (logged once per sweep).
//
// Retention (retentionLoop → applyRetention): a tiered log is opened with
// local.retention.ms/bytes (capped by retention.*) as its retention, and
// hotlog.ApplyRetentionBelow never deletes by time or size a segment that
// ends above localDeleteLimit: the end of the manifest's gap-free run
// (or the tiered log start). So a segment is deleted locally only after its
// manifest entry exists. On the leader, remote retention then removes the
// oldest entries wholly below the log start, older than retention.ms or
// over retention.bytes (tiered bytes + local bytes above them): it raises
// the tiered log start in etcd first, deletes the entries (CAS on their
// versions), then queues their objects for deletion — manifest entry
// first, then object.
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
// Leader restart at the tiered end (tiering_restore_safety.go): a replica
// about to lead whose local log ends below the end of the manifest's
// gap-free run (an empty disk after a restore or a disk loss) first
// restarts its log empty at that end (hotlog.ResetToWithProducerSnapshot
// with the producer state of the object ending there, read from the bucket
// before the replica mutex is taken and bounded by snapshotReadTimeout;
// else ResetTo), then becomes leader: new records get offsets from that
// end on, and everything below it is served from the bucket. The restart
// of a follower at its leader's local start shares the helpers
// (follower.RestartSnapshot and RestartLog; wiring in follower.go).
//
// Log start across tiers: partition.logStartOffset() = max(tiered log
// start, min(first tiered offset, hot log start)); DeleteRecords raises the
// tiered log start in etcd (so a restart cannot resurrect offsets from the
// bucket), then the hot log's, then removes entries wholly below it.
//
// Upload lag: after each look at a partition the uploader stores the bytes
// of its sealed segments not yet in the manifest (partition.uploadLag).
// While that exceeds Tier.MaxUploadLagBytes (tier.upload.max.lag.bytes), a
// Produce to the partition waits up to Tier.ThrottleWait for it to fall,
// then answers THROTTLING_QUOTA_EXCEEDED (retriable), so a broker cut off
// from its bucket stops taking data before its disk fills.
//
// State: tieringState.mu guards the per-partition upload bookkeeping,
// pending deletes, topic.json memory and counters; it is never held across
// I/O and nests inside nothing. With several brokers (issue 5) only
// leaders upload and retain, and only the controller should sweep.
package broker
