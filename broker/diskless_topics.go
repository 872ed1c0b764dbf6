package broker

// Diskless topics (diskless.enable=true, package diskless) at the topic
// level: creation, the registry's lookups, how Metadata advertises their
// partitions, and what the replica-oriented admin APIs and transactions
// answer for them. Their data path (Produce, Fetch, ListOffsets...) is
// package diskless's.
//
// A diskless topic is in the registry like any topic (names, ids,
// configs, DescribeConfigs, DeleteTopics, group offsets all work as for a
// classic one), with one empty replica list per partition in its record,
// default leaderless states and no open partition: no directory, log or
// replica, so the tier uploader, cleaner, retention, lag monitor,
// DescribeLogDirs and followers, which walk open partitions only, never
// see it. Lookups that find partitions this broker leads (lookup,
// lookupByID, hosted) answer as for a partition hosted elsewhere; the data
// path asks disklessTopic first.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/diskless"
	"github.com/strata-log/strata/metadata"
)

// Messages of the refusals that concern diskless partitions.
const (
	disklessNoReplicasMessage = "diskless partitions have no replicas to move"
	disklessNoElectionMessage = "diskless partitions have no elected leader: any broker serves them"
	disklessTxnMessage        = "transactions are not supported on diskless topics"
	disklessNoBucketMessage   = "diskless.enable=true needs a bucket: this broker has no object store configured"
	disklessAssignmentMessage = "diskless topics take no replica assignment: their partitions have no replicas"
)

// disklessTopic finds a diskless topic by name: its record (name, id,
// partition count = len(Replicas), overrides) and effective config. false
// for an unknown or a classic topic.
func (m *partitionManager) disklessTopic(name string) (metadata.Topic, metadata.TopicConfig, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return disklessEntry(m.byName[name])
}

// disklessTopicByID is disklessTopic by topic id.
func (m *partitionManager) disklessTopicByID(id metadata.TopicID) (metadata.Topic, metadata.TopicConfig, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return disklessEntry(m.byID[id])
}

// disklessEntry: e's topic and config when e is a diskless topic.
// REQUIRES: m.mu held.
func disklessEntry(e *topicEntry) (metadata.Topic, metadata.TopicConfig, bool) {
	if e == nil || !e.cfg.DisklessEnable {
		return metadata.Topic{}, metadata.TopicConfig{}, false
	}
	return e.topic, e.cfg, true
}

// disklessAZKey is the client.id key through which clients name their
// zone (Inkless's convention), e.g. client.id "app-1,diskless_az=eu-west-1a".
const disklessAZKey = "diskless_az"

// clientRack is the zone a client names in its client.id: the value of the
// diskless_az key among comma- or semicolon-separated key=value pairs; ""
// when it names none.
func clientRack(clientID string) string {
	for _, pair := range strings.FieldsFunc(clientID, func(r rune) bool { return r == ',' || r == ';' }) {
		key, value, ok := strings.Cut(pair, "=")
		if ok && strings.TrimSpace(key) == disklessAZKey {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// disklessMetadataPartitions describes a diskless topic's partitions for
// Metadata and DescribeTopicPartitions. The leader is diskless.Leader over
// view's live brokers, preferring the client's rack. Replicas and ISR are
// [leader]: the partition has no replicas, but clients and tools (kcat -L,
// kafka-topics --describe) expect the leader among them, and one broker
// that serves the partition is the truthful short answer. Leader epoch 0
// (there are no elections) and no offline replicas. With no live broker the
// partition is LEADER_NOT_AVAILABLE with empty lists.
func disklessMetadataPartitions(t topicView, view brokerView, rack string) []kmsg.MetadataResponseTopicPartition {
	out := make([]kmsg.MetadataResponseTopicPartition, len(t.topic.Replicas))
	for i := range out {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = int32(i), 0
		mp.Leader = diskless.Leader(t.topic.ID, int32(i), view.list, rack)
		mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{}, []int32{}, []int32{}
		if mp.Leader >= 0 {
			mp.Replicas, mp.ISR = []int32{mp.Leader}, []int32{mp.Leader}
		} else {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		out[i] = mp
	}
	return out
}

// disklessReplicas is a new diskless topic's assignment: one empty list
// per partition. A manual assignment is refused (INVALID_REPLICA_ASSIGNMENT),
// the partition count is checked as for a classic topic, and the
// replication factor, which has no meaning without replicas, only has to
// be a valid one (-1 was resolved by topicSpecFromRequest). hasBucket:
// the broker has an object store, without which a diskless topic could
// hold nothing (INVALID_CONFIG).
func disklessReplicas(spec topicSpec, hasBucket bool) ([][]int32, int16, string) {
	switch {
	case !hasBucket:
		return nil, kerr.InvalidConfig.Code, disklessNoBucketMessage
	case spec.assignment != nil:
		return nil, kerr.InvalidReplicaAssignment.Code, disklessAssignmentMessage
	case spec.partitions < 1 || spec.partitions > maxPartitions:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("%d partitions, want 1..%d", spec.partitions, maxPartitions)
	case spec.replicationFactor < 1:
		return nil, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d must be at least 1", spec.replicationFactor)
	}
	return metadata.DisklessAssignment(int(spec.partitions)), 0, ""
}

// disklessTxnRefused is the answer to a transactional write to a topic
// with config cfg: UNSUPPORTED_FOR_MESSAGE_FORMAT and disklessTxnMessage
// for a diskless topic, 0 and "" when the write may go on (a classic topic,
// or a batch that is not transactional). The produce path asks it per
// partition before appending.
func disklessTxnRefused(cfg metadata.TopicConfig, transactional bool) (int16, string) {
	if transactional && cfg.DisklessEnable {
		return kerr.UnsupportedForMessageFormat.Code, disklessTxnMessage
	}
	return 0, ""
}

// disklessTxnAnswer is the AddPartitionsToTxn answer of a transaction
// that adds a diskless partition: UNSUPPORTED_FOR_MESSAGE_FORMAT for
// those (UNKNOWN_TOPIC_OR_PARTITION past a diskless topic's last
// partition) and OPERATION_NOT_ATTEMPTED for the others, as Kafka answers
// a request that fails in part. nil when rt adds no diskless partition.
func (m *partitionManager) disklessTxnAnswer(rt kmsg.AddPartitionsToTxnRequestTransaction) *kmsg.AddPartitionsToTxnResponseTransaction {
	var tps []txn.TopicPartition
	var codes []int16
	refused := false
	for _, t := range rt.Topics {
		topic, _, isDiskless := m.disklessTopic(t.Topic)
		for _, p := range t.Partitions {
			code := kerr.OperationNotAttempted.Code
			switch {
			case isDiskless && (p < 0 || int(p) >= len(topic.Replicas)):
				code, refused = kerr.UnknownTopicOrPartition.Code, true
			case isDiskless:
				code, refused = kerr.UnsupportedForMessageFormat.Code, true
			}
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
			codes = append(codes, code)
		}
	}
	if !refused {
		return nil
	}
	res := txn.AddPartitionsAnswer(rt.TransactionalID, tps, codes)
	return &res
}

// disklessTopics lists the diskless topics (record and config).
func (m *partitionManager) disklessTopics() []metadata.Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []metadata.Topic
	for _, e := range m.byName {
		if t, _, ok := disklessEntry(e); ok {
			out = append(out, t)
		}
	}
	return out
}
