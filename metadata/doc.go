// Package metadata keeps everything Strata stores in etcd: the cluster id, the
// broker registry (leases), the controller election, topics and their configs,
// partition state (leader, leader epoch, replicas, ISR) with compare-and-swap,
// the tier manifest and producer-id blocks (DESIGN.md §2, §4, §5).
//
// The same code runs against an etcd embedded in the process (single-node
// mode, Embedded) and against an external etcd cluster (3.4 or newer; the
// client uses only KV, Txn, Lease and Watch, which 3.4 serves).
//
// # Key layout
//
// Every key of a cluster lives under one prefix, P = "/strata/<cluster>/".
// Several clusters can share one etcd. Numbers in keys are zero-padded so that
// etcd's byte order is numeric order.
//
//	P + "cluster-id"                          Kafka-style cluster id (22-char base64url of a random UUID), created once
//	P + "brokers/<nodeId>"                    JSON BrokerInfo, attached to the broker's lease
//	P + "controller/..."                      reserved: controller election (client/v3/concurrency)
//	P + "topics/<name>"                       JSON topic record
//	P + "topic-ids/<topicId>"                 the topic's name (plain bytes): id → name index
//	P + "deleted-topics/<topicId>"            decimal unix ms: the id of a deleted topic (never removed)
//	P + "partitions/<topicId>/<partition:05>" JSON partition state
//	P + "tier/<topicId>/<partition:05>/<baseOffset:020>"  JSON tier manifest entry (one per tiered segment)
//	P + "tier/<topicId>/<partition:05>/log-start"         decimal int64: the partition's tiered log start
//	P + "diskless/heads/<topicId>/<partition:05>"               JSON diskless head (opaque here; diskless/doc.go)
//	P + "diskless/runs/<topicId>/<partition:05>/<baseOffset:020>" JSON diskless run (opaque here; diskless/doc.go)
//	P + "producer-ids/next"                   decimal int64: first producer id not yet handed out
//	P + "scram/<user>/<mechanism>"            JSON SCRAM credential (<user> path-escaped: no '/')
//	P + "acls/<aclId>"                        JSON ACL; <aclId> = 16 hex digits of SHA-256(value)
//	P + "quotas/<entity>"                     JSON client quotas of one entity
//	P + "brokerconfigs/default"               JSON dynamic broker configs, cluster-wide
//	P + "brokerconfigs/<nodeId>"              JSON dynamic broker configs of one broker
//	P + "features"                            JSON finalized feature levels, name → level; mod revision = epoch
//	P + "retention-holds/<nodeId>"            JSON array of the committed offsets of groups on held topics (RetentionHold)
//
// <topicId> is the Kafka string form of the UUID (TopicID.String: 22
// characters of unpadded base64url), the same form Kafka tools print.
//
// # Values
//
// Topic record (topics/<name>); unknown fields are ignored when read so that
// later versions can add fields:
//
//	{"id":"<topicId>","replicas":[[1,2],[2,1]],"configs":{"retention.ms":"1000"},"internal":false}
//
// replicas[p] lists the broker ids of partition p, preferred leader first; the
// partition count is len(replicas). configs holds only the overrides.
//
// A diskless topic (configs "diskless.enable":"true", fixed at creation)
// has an empty list per partition and never a partition state key: its
// partitions have no replicas, no ISR and no elected leader (package
// diskless):
//
//	{"id":"<topicId>","replicas":[[],[],[]],"configs":{"diskless.enable":"true"}}
//
// Partition state (partitions/<topicId>/<partition:05>):
//
//	{"leader":1,"leaderEpoch":0,"replicas":[1,2],"isr":[1,2]}
//
// While a reassignment runs (KIP-455) it also names the replicas being
// added and removed; replicas is then the target followed by the leaving
// ones, and the topic record's replicas[p] is the same list
// (CASAssignment writes both in one transaction):
//
//	{"leader":1,"leaderEpoch":3,"replicas":[4,2,3,1],"isr":[1,2,3],"addingReplicas":[4],"removingReplicas":[1],
//	 "reassignStartMs":1796461200000}
//
// reassignStartMs is when the move began (unix ms), for the time it takes.
//
// Broker (brokers/<nodeId>):
//
//	{"nodeId":1,"host":"127.0.0.1","port":9092,"rack":"",
//	 "endpoints":{"SASL_SSL":"b1.example:9093","INTERNAL":"10.0.0.1:9094"},
//	 "http":"b1.example:9644"}
//
// host:port is the first listener's endpoint; endpoints (absent
// before) name every listener's advertised endpoint; http (absent before,
// and for brokers without an HTTP server) is the advertised host:port of
// the broker's HTTP server, where other brokers read its tier status.
//
// Tier manifest entry (tier/<topicId>/<partition:05>/<baseOffset:020>), one
// per segment object that was uploaded, verified and committed (DESIGN.md
// §5); baseOffset in the key equals the value's:
//
//	{"baseOffset":0,"lastOffset":5123,"firstTimestamp":1700000000000,
//	 "maxTimestamp":1700000009000,"leaderEpoch":3,
//	 "key":"strata/topics/orders-<id>/00000/00000000000000000000-3-<uuid>.seg","size":16777984}
//
// leaderEpoch is the epoch of the segment's last batch; key and size name the
// object, so a reader opens it without listing or a HEAD. The tiered log
// start (tier/<topicId>/<partition:05>/log-start) is raised, never lowered,
// by DeleteRecords and remote retention: offsets below it are gone even
// where an object still holds them. Watch delivers TierPut, TierDeleted and
// TierLogStartPut events; Snapshot carries every entry and log start.
//
// Tiered compaction replaces a contiguous run of entries by the
// entries of the rewritten objects in one transaction (SwapTierEntries):
// the new entries cover exactly the run's offsets, so the manifest stays
// gap-free. A compacted object may hold fewer offsets than its entry
// claims (batches removed at either end): the entry's baseOffset is at or
// below the object's first batch and its lastOffset at or above the
// object's last offset; offsets in between that the object lacks were
// removed by compaction.
//
// # Security records
//
// SCRAM credential (scram/<user>/<mechanism>, mechanism SCRAM-SHA-256 or
// SCRAM-SHA-512; never a password, see package auth). []byte fields are
// standard base64:
//
//	{"salt":"<b64>","iterations":8192,"storedKey":"<b64>","serverKey":"<b64>"}
//
// ACL (acls/<aclId>); enums are Kafka's wire codes (auth.ResourceType,
// auth.PatternType, auth.Operation, auth.Permission):
//
//	{"resourceType":2,"resourceName":"orders","patternType":3,"principal":"User:alice",
//	 "host":"*","operation":3,"permission":3}
//
// <aclId> is the first 8 bytes of the SHA-256 of the value, in hex: one ACL
// has one key, so CreateACLs is idempotent (If CreateRevision == 0 Then put;
// a key already holding the same ACL is success) and concurrent creators of
// the same ACL cannot duplicate it. DeleteACLs deletes matches guarded by
// ModRevision == read, so it returns exactly what it removed.
//
// Client quotas (quotas/<entity>): a JSON object of quota name → number,
// 1..MaxQuotasPerEntity entries, each finite and ≥ 0:
//
//	{"producer_byte_rate":1048576,"request_percentage":50}
//
// <entity> is Kafka's client-quota entity: "user=<name>",
// "client-id=<name>" or "user=<name>,client-id=<name>" (user first; names
// query-escaped; "<default>" for the default user or client id, which a
// name cannot spell since '<' is escaped). AlterQuotas is a CAS on the key's
// ModRevision; an entity left without quotas is deleted.
//
// Dynamic broker configs (brokerconfigs/default, brokerconfigs/<nodeId>): a
// JSON object of Kafka config name → value string, 1..MaxBrokerConfigs
// entries; which names are dynamic and how they parse is the broker's rule.
// AlterBrokerConfigs is a CAS on the key's ModRevision; a record left empty
// is deleted. WatchBrokerConfigs signals after any change under
// brokerconfigs/, with WatchSecurity's guarantees.
//
// WatchSecurity signals (coalesced) after any change under scram/, acls/ or
// quotas/; consumers re-read with ScramCredential, ACLs and Quotas.
//
// Every decoder validates what it reads (sizes, ids, names) and returns an
// error wrapping ErrCorrupt instead of panicking: etcd is outside input.
//
// # Partition states: stored or initial
//
// A partition whose state key does not exist has its initial state:
// leader = first replica, leader epoch 0, ISR = replicas, Version 0. Creating a
// topic therefore writes only two keys, whatever the partition count (etcd
// limits a transaction to --max-txn-ops operations, 128 by default), and a
// topic and its partition states still come into being, and go, atomically.
// The first CASPartitionState of a partition expects Version 0 and creates the
// key ("key absent" compare); later ones compare the key's ModRevision.
// PartitionStates returns stored and initial states alike.
//
// # Writes and their guards
//
// Every write that depends on what was read is one etcd transaction
// (If ... Then ... Else) guarded by revisions, so concurrent writers cannot
// lose each other's updates:
//
//	ClusterID           If cluster-id CreateRevision == 0      Then put           Else get
//	CreateTopic         If topics/<name> CreateRevision == 0   Then put topic, put topic-ids/<id>
//	                                                          Else → ErrTopicExists
//	DeleteTopic         If topics/<name> ModRevision == read   Then delete topic, topic-ids/<id>,
//	                                                               partitions/<id>/ (prefix), tier/<id>/ (prefix),
//	                                                               diskless/{heads,runs}/<id>/ (prefix);
//	                                                               put deleted-topics/<id>
//	AlterTopicConfigs   If topics/<name> ModRevision == read   Then put           Else re-read and retry
//	AddPartitions       If topics/<name> ModRevision == read   Then put           Else re-read and retry
//	CASPartitionState   If partitions/<id>/<p> ModRevision == st.Version (0: absent)
//	                    and topic-ids/<id> exists              Then put           Else → ErrCASFailed
//	CASPartitionStateGuarded  the same, and guard key CreateRevision == guard's
//	                    (the controller's election key)        Else → ErrFenced if the guard failed,
//	                                                               else ErrCASFailed
//	CASAssignment       If topics/<name> ModRevision == read and
//	                    partitions/<id>/<p> ModRevision == st.Version
//	                    (and the guard, when given)            Then put both      Else → ErrFenced / ErrCASFailed
//	AllocateProducerIDs If producer-ids/next ModRevision == read Then put next+count Else retry
//	CommitTierEntry     If tier/<id>/<p>/<base> CreateRevision == 0
//	                    and topic-ids/<id> exists              Then put   Else same key: ok;
//	                                                          other key: ErrTierEntryExists
//	DeleteTierEntries   If each entry's ModRevision <= its Version read  Then delete all
//	                                                          Else → ErrCASFailed
//	RaiseTierLogStart   If log-start ModRevision == read and topic exists Then put (only upward)
//	SwapTierEntries     If each old entry's ModRevision == its Version, each new key not
//	                    reusing an old base absent, and topic exists
//	                                                          Then put new keys, put reused keys,
//	                                                               delete the other olds
//	                                                          Else already applied: ok;
//	                                                               else → ErrTierEntriesChanged
//
//	CommitDiskless      If each heads/<id>/<p> ModRevision == read (0: absent)
//	                                                          Then put heads and runs  Else false (decide again)
//	PutDisklessHead     the same for one head and no run (DeleteRecords)
//	DeleteDisklessRuns  unguarded: runs are immutable, and only the merge deletes
//	                    them, after their segment object's entry is committed
//
// Brokers are written unconditionally under their own lease: a broker that
// restarts after a crash replaces its stale registration at once instead of
// waiting for the old lease to expire.
//
// # Invariants
//
//   - A topic key exists iff its topic-ids key exists; they are written and
//     deleted in the same transaction.
//   - A topic id is a random (v4) UUID, never the zero UUID, and never reused:
//     a topic deleted and created again gets a new id, so stale partition
//     states, tier entries and local directories of the old incarnation
//     cannot be mistaken for the new one.
//   - Partition state keys exist only under the id of an existing topic
//     (CASPartitionState checks topic-ids/<id>), and only for partitions below
//     the partition count, which never decreases.
//   - Partition state Version is the key's etcd ModRevision: it grows with
//     every write, so a writer holding an old Version (a deposed leader) fails
//     its CAS with ErrCASFailed.
//   - Producer-id blocks never overlap: producer-ids/next only grows, by CAS.
//   - At most one tier entry per (topic id, partition, base offset): a
//     retried or concurrent upload of a segment cannot commit a second
//     entry; the uploader commits segments in offset order, so a
//     partition's entries have no gaps above its tiered log start. Tier
//     keys of a topic go with the topic (DeleteTopic deletes the prefix).
//   - deleted-topics/<id> is written with the deletion of the topic and
//     never removed: the orphan sweeper deletes bucket objects only of live
//     or deleted ids (TopicIDKnown), never of an id etcd does not know
//     (objects whose etcd index was lost stay restorable). One small key
//     per deleted topic is the cost.
//
// # Brokers and liveness
//
// A broker registers under a lease of TTL seconds that the store keeps alive
// (RegisterBroker). Its lost channel closes when no renewal has been answered
// for two thirds of the TTL, before the server can expire the lease, so a
// leader cut off from etcd stops leading before the controller may elect
// another (DESIGN.md §4). On a clean stop the lease is revoked and the
// registration disappears at once; after a crash it disappears when the
// lease expires. A broker holds its live registration in a Registrar, which
// also decides which partition states it leads (Leads): those naming it
// with its live registration's epoch.
//
// # Limits
//
// A topic has at most MaxPartitions partitions of at most
// MaxReplicationFactor replicas; its record must also fit etcd's request
// size limit (1.5 MiB by default), which holds for 100,000 partitions of
// three small broker ids. Producer-id blocks are at most 2^24 ids.
//
// # Concurrency
//
// Store holds no locks: etcd orders all writes, and every read-modify-write
// is a CAS. Each Watch has one goroutine that owns its state (the id → name
// cache); each registration has one keepalive goroutine, which Close waits
// for so that it can revoke its lease before the client closes.
//
// # Watching
//
// Watch streams events from one etcd watch on the whole prefix. A consumer
// keeps a view as follows: call Snapshot, then Watch(ctx, snapshot.Revision+1)
// and apply events in order. Events carry the etcd revision; a put is the
// full new value, so applying an event twice is harmless. If etcd compacted
// the history the watch needs (or the watch breaks), the stream delivers a
// Resync event: the consumer must then discard its view and call Snapshot
// again. Events after the Resync continue from the Resync's revision, so a
// Snapshot taken after receiving it misses nothing. The channel is closed when
// ctx ends.
package metadata
