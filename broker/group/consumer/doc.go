// Package consumer is the pure core of the broker side of KIP-848, the
// next-generation consumer group protocol ("group.protocol=consumer"): the
// server-side assignors, member reconciliation and the heartbeat epoch
// checks. It has no I/O, no time source, no goroutines and imports no other
// Strata package; the group coordinator (package group) owns the mutable
// group state, persists it and calls these functions.
//
// # Model (KIP-848 "Group Epoch - Assignment Epoch - Member Epoch")
//
//   - Group epoch: bumped whenever the group's metadata changes (a member
//     joins, leaves or changes its subscription, a subscribed topic gains
//     partitions); kept by Group (below).
//   - Target assignment: computed by an Assignor from the members'
//     subscriptions (MemberSpec, topic ids resolved from names and, by the
//     caller, from the regular expression) and the topics' metadata. It is
//     tagged with the assignment epoch, the group epoch it was computed for.
//     The target for a given epoch never changes.
//   - Member epoch: each member's own epoch, MemberState.Epoch. It reaches
//     the assignment epoch only when the member has revoked every partition
//     it must give up; PreviousEpoch is the epoch before the last update.
//
// Partitions are named by TopicPartition (topic id, partition); Assignment
// is a set of them (topic id → sorted, duplicate-free partition list).
//
// # Assignors (KIP-848 "Assignors")
//
//   - uniform (Uniform): every partition of a subscribed topic goes to
//     exactly one member subscribed to that topic. Sticky: a member keeps
//     the partitions of its current target while balance allows. With
//     homogeneous subscriptions member counts differ by at most one and a
//     member that joins or leaves moves only what must move. Heterogeneous
//     subscriptions are balanced best-effort: no partition could move to a
//     member subscribed to its topic that has at least two fewer partitions
//     than its owner. Racks are not considered.
//   - range (Range): per topic, the partitions are split into contiguous
//     ranges over the members subscribed to it, sorted by member id; the
//     first (partitions mod members) members get one more. Co-partitioned
//     topics line up. Not sticky.
//
// Both are deterministic: the same input gives the same output.
//
// Which one a group uses (Kafka's preferred server assignor): the one most
// of its members name in ServerAssignor, ties going to the earlier in
// Config.Assignors (group.consumer.assignors), or the first configured
// when no member names one. A member naming another one (or changing its
// choice) bumps the group epoch, so the target is recomputed with the
// assignor the group then uses.
//
// # Reconciliation (KIP-848 "Reconciliation", "Member States")
//
// Reconcile moves one member from its current state towards its target,
// one heartbeat at a time. The partitions a member owns are its assigned
// partitions and its partitions pending revocation; another member may
// not be given a partition until the owner has released it.
//
//	computeNext(epoch):
//	  keep    = assigned ∩ target          (never revoked)
//	  revoke  = assigned − target
//	  free    = (target − assigned) not owned by any other member
//	  blocked = (target − assigned) owned by another member
//	  if revoke ≠ ∅ and the client may still own some of it:
//	      UNREVOKED_PARTITIONS, Epoch = epoch, Assigned = keep,
//	      PendingRevocation = revoke
//	  else: Epoch = target epoch, Assigned = keep ∪ free,
//	      PendingRevocation = ∅,
//	      UNRELEASED_PARTITIONS if blocked ≠ ∅ else STABLE
//
//	STABLE:                 computeNext(Epoch) unless Epoch = target epoch
//	                        and Assigned = target
//	UNREVOKED_PARTITIONS:   wait while the client still reports a pending
//	                        partition as owned (or reports nothing); then
//	                        computeNext(min(Epoch+1, target epoch))
//	UNRELEASED_PARTITIONS:  computeNext(Epoch): released partitions are
//	                        given without a new epoch
//	UNKNOWN:                FENCED_MEMBER_EPOCH unless the client reports
//	                        owning nothing; then computeNext(target epoch)
//
// The client's owned partitions come from its heartbeat (nil when the
// request did not carry them, in which case the client is assumed to still
// own everything it was given). Every update sets PreviousEpoch to the
// epoch before it, as Kafka's ConsumerGroupMember.Builder.updateMemberEpoch.
//
// Invariants (tested by a randomized simulation, sim_test.go):
//
//   - no partition is assigned or pending revocation to two members at
//     once, provided the caller answers ownedByOthers from the current
//     states of the other members (Owners does) and applies each result
//     before reconciling the next member;
//   - a partition in a member's assigned set and in its target is never
//     revoked from it;
//   - once the group's metadata stops changing and clients keep
//     heartbeating and acknowledging revocations, every member reaches
//     STABLE with Assigned equal to its target at the target epoch.
//
// # Heartbeat epoch checks (KIP-848 "Member Epoch - Fencing",
// "ConsumerGroupHeartbeat API")
//
// CheckEpoch validates a heartbeat's MemberEpoch against the stored member:
//
//	 0   join (or rejoin of a known member id, which resets it)
//	-1   leave; UNKNOWN_MEMBER_ID if the member is not known
//	-2   static leave: the member keeps its assignment until its session
//	     expires or its instance id rejoins; needs a group.instance.id
//	>0   UNKNOWN_MEMBER_ID if the member is not known;
//	     FENCED_MEMBER_EPOCH if above the stored epoch, or below it unless it
//	     is the previous epoch and the request's owned partitions are a
//	     subset of the member's assigned partitions (the response carrying
//	     the bump was lost)
//	<-2  INVALID_REQUEST
//
// Errors are this package's sentinels (ErrFencedMemberEpoch, ...); the
// protocol edge maps them to Kafka error codes.
//
// # Group (group.go, heartbeat.go, records.go, describe.go)
//
// Group is one group's state machine on top of the functions above, still
// pure: logical time comes in as nowMs arguments and Tick, changes go out
// as Records (TakeRecords), and its owner serialises calls. It holds the
// group epoch, the assignment epoch (always equal: the target is
// recomputed synchronously on every bump), the topics' metadata
// (SetTopics), the members (subscription, client information, MemberState,
// session and rebalance deadlines), the target and the Owners map.
//
// Heartbeat(req, nowMs) follows ConsumerGroupHeartbeat:
//
//	validate   INVALID_REQUEST: empty member id, epoch < -2, negative
//	           partition; on joins: RebalanceTimeoutMs -1, no subscription
//	           (names and regex both null), owned partitions not empty.
//	           UNSUPPORTED_ASSIGNOR: ServerAssignor not in Config.Assignors.
//	CheckEpoch UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH (a static member away
//	           has epoch -2: any heartbeat but a join or leave is fenced)
//	epoch 0    new member (GROUP_MAX_SIZE_REACHED at Config.MaxSize): the
//	           epoch is bumped; a known member id: it restarts from an
//	           empty assignment (the client dropped its partitions), the
//	           epoch is bumped only if its subscription changed; an
//	           instance id whose member left with -2: the new member id
//	           takes over that member's target, assigned partitions and
//	           epoch, the old id is removed, nothing moves; an instance id
//	           of an active member: UNRELEASED_INSTANCE_ID.
//	epoch -1   the member is removed, the epoch bumped.
//	epoch -2   (static members) the member stays, epoch -2, keeping its
//	           assigned partitions for its instance id until its session
//	           expires; it releases those pending revocation.
//	epoch > 0  the session is renewed; a changed set of topic names bumps
//	           the epoch; then Reconcile with the request's owned
//	           partitions.
//
// Subscriptions are topic names: the caller resolves
// SubscribedTopicRegex into names (and sends them again when topics
// appear or disappear); the regex itself is kept for Describe. The
// response carries the assignment on joins, when the request carried its
// owned partitions (the client may have lost a response) and when the
// assigned partitions changed.
//
// Tick(nowMs) removes members whose session expired and members still in
// UNREVOKED_PARTITIONS one rebalance timeout (the member's, from its
// heartbeats) after the revocation began, then bumps the epoch.
//
// # Offset commits (commit.go; KIP-1251 "Assignment epochs")
//
// CheckCommit(member, epoch, partitions) validates a commit of a member:
// at the member's epoch it is accepted; above it, STALE_MEMBER_EPOCH;
// below it, accepted only when every partition has been the member's
// since an epoch at or below the commit's (so no other member can have
// owned it since), else STALE_MEMBER_EPOCH. This accepts the commits a
// client pipelines with the heartbeat that moves its epoch, and the
// commits it makes while revoking. The epoch at which a member got each
// partition it owns is derived state (member.assignedAt), not persisted:
// after Replay it is the member's current epoch, so older epochs are
// refused until the member reconciles again.
//
// # Records and recovery
//
// Every change appends plain records named after Kafka's group-coordinator
// records (ConsumerGroupMetadataValue: the epoch;
// ConsumerGroupPartitionMetadataValue: subscribed topics, on every bump;
// ConsumerGroupMemberMetadataValue; ConsumerGroupTargetAssignmentMemberValue
// for the members whose target changed;
// ConsumerGroupTargetAssignmentMetadataValue;
// ConsumerGroupCurrentMemberAssignmentValue when a member's state changed;
// member records have tombstones). Replay of the records, whole or
// compacted to the last per key, rebuilds an equal group; deadlines are not
// persisted and restart from the replay time.
//
// # Records in __consumer_offsets (kafka_records.go)
//
// EncodeRecord and DecodeRecord write and read the records above exactly
// as Kafka 4 does (group-coordinator/src/main/resources/common/message/
// ConsumerGroup*{Key,Value}.json; kmsg v1.15 has no types for them).
// Integers are big-endian. A key starts with an int16 record type and is
// not flexible: strings are int16 length + bytes (at most 32767, never
// null). A value starts with an int16 version, always 0, and is flexible:
// compact string = uvarint(length+1) + bytes (uvarint 0: null), compact
// array = uvarint(count+1) + elements, uuid = 16 bytes, and every struct
// (the value itself and each array element) ends with a tagged-field
// section, uvarint count + (uvarint tag, uvarint size, bytes) each.
// Strata writes empty sections and skips any tag it reads.
//
//	type key (after the type)   value fields (after version 0), in order
//	3    GroupId                Epoch int32
//	                            [tag 0 MetadataHash int64, tag 1
//	                            CreationTimeMs int64: later Kafka; skipped]
//	4    GroupId                Topics [TopicId uuid, TopicName string,
//	                            NumPartitions int32, PartitionMetadata
//	                            [Partition int32, Racks []string]]
//	                            (Strata writes PartitionMetadata empty, as
//	                            Kafka when no rack is known)
//	5    GroupId, MemberId      InstanceId string?, RackId string?,
//	                            ClientId string, ClientHost string,
//	                            SubscribedTopicNames []string,
//	                            SubscribedTopicRegex string?,
//	                            RebalanceTimeoutMs int32, ServerAssignor
//	                            string? [tag 0 ClassicMemberMetadata: skipped]
//	6    GroupId                AssignmentEpoch int32
//	7    GroupId, MemberId      TopicPartitions [TopicId uuid,
//	                            Partitions []int32]
//	8    GroupId, MemberId      MemberEpoch int32, PreviousMemberEpoch
//	                            int32, State int8, AssignedPartitions and
//	                            PartitionsPendingRevocation, each [TopicId
//	                            uuid, Partitions []int32 [tag 0
//	                            AssignmentEpochs: later Kafka; skipped]]
//
// "?" marks nullable strings: Strata writes "" as null and reads null as
// "". A null value is a tombstone: member records (5, 7, 8) decode to
// their struct with Tombstone set, group records (3, 4, 6) to
// GroupRecordTombstone. Other record types (0-2 classic, 9 and up share
// and streams groups) are not this package's: DecodeRecord says so with
// ok false. Every length and count is checked against the bytes left
// before allocating, and a record must use all its bytes.
//
// # Done by the coordinator (package group, coordinator_consumer.go)
//
// The ConsumerGroupHeartbeat/Describe handlers (member id generation for
// v0, regex resolution, mapping errors with ErrorCode), persisting
// TakeRecords (EncodeRecord) before responding, calling SetTopics on every
// heartbeat and Tick from its clock, and the offline conversion of an
// empty consumer group to a classic one (and back). Not done: rack-aware
// assignment, the online upgrade of a classic group with members
// (KIP-848's mixed groups).
package consumer
