package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/tier"
)

// OffsetForLeaderEpoch: v0-4.
//
// For each partition: the largest epoch <= the requested one that the log
// knows, and the end offset of that epoch (the start of the next epoch, or
// the LEO for the latest), from the leader-epoch checkpoint (KIP-101,
// KIP-279). An epoch older or newer than everything known answers (-1, -1),
// except the partition's current epoch, which ends at the LEO.
// CurrentLeaderEpoch (v2+) is checked first as in every data-path API
// (KIP-320). Only the leader answers (NOT_LEADER_OR_FOLLOWER). A follower
// (ReplicaID >= 0, v3+; truncating by KIP-101) gets the replica's answer,
// Replica.LeaderEpochEndOffset, which counts the leader's current epoch as
// starting at its epoch start offset even before a batch of it is written
// (replication/doc.go, "Truncation"); an epoch that ended in the bucket is
// answered from there for both.
//
// Authorization: ClusterAction on the Cluster (brokers), or
// Describe on the topic (consumers validating their position, KIP-320);
// TOPIC_AUTHORIZATION_FAILED otherwise.
//
// Across tiers: an epoch that ended in the bucket is answered
// from the tiered objects' leader-epoch ranges
// (tier.ColdSource.EpochEndOffset): the hot log's checkpoint no longer knows epochs
// whose segments were deleted locally. Later epochs come from the hot log.

func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	cluster := b.authz.allowedCluster(rc, auth.OpClusterAction)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		allowed := cluster || b.authz.allowedTopic(rc, auth.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			if !allowed {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			st.Partitions = append(st.Partitions, b.epochEndOffset(ctx, rt.Topic, rp, req.ReplicaID >= 0 && req.Version >= 3))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// epochEndOffset answers one partition.
func (b *Broker) epochEndOffset(ctx context.Context, topic string, rp kmsg.OffsetForLeaderEpochRequestTopicPartition,
	follower bool,
) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	sp.Partition = rp.Partition
	if tp, code, ok := b.disklessReadPart(false, topic, [16]byte{}, rp.Partition); ok {
		// A diskless partition has one epoch, 0, which never ends: any
		// broker answers with the log end, and nothing is ever truncated.
		if sp.ErrorCode = code; code == 0 {
			var end int64
			if end, sp.ErrorCode = b.disklessEpochEnd(ctx, tp); sp.ErrorCode == 0 {
				sp.LeaderEpoch, sp.EndOffset = 0, end
			}
		}
		return sp
	}
	p, code := b.parts.lookup(topic, rp.Partition)
	if code == 0 {
		code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
	}
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	if follower {
		return followerEpochEndOffset(ctx, b.coldSrc, p, rp, sp)
	}
	if current := p.leaderEpoch(); rp.LeaderEpoch == current {
		// Kafka records the leader's epoch in its cache when it becomes
		// leader, so the current epoch always ends at the LEO, even before
		// a batch of that epoch is appended.
		sp.LeaderEpoch, sp.EndOffset = current, p.log.LogEndOffset()
		return sp
	}
	epoch, end, inBucket, err := b.coldSrc.EpochEndOffset(ctx, tp(p), p.localLogStartOffset(), rp.LeaderEpoch)
	if err != nil {
		sp.ErrorCode = dataPathErrorCode(err)
		b.log.Warn("offset for leader epoch from the bucket failed", "topic", topic, "partition", rp.Partition, "err", err)
		return sp
	}
	if inBucket {
		sp.LeaderEpoch, sp.EndOffset = epoch, end
		return sp
	}
	sp.LeaderEpoch, sp.EndOffset = p.log.EndOffsetForEpoch(rp.LeaderEpoch)
	return sp
}

// followerEpochEndOffset answers a follower from the leading replica; an
// epoch that ended below the local log start comes from the bucket (the
// hot log's epoch cache no longer knows it).
func followerEpochEndOffset(ctx context.Context, cold tier.ColdSource, p *partition,
	rp kmsg.OffsetForLeaderEpochRequestTopicPartition, sp kmsg.OffsetForLeaderEpochResponseTopicPartition,
) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	var epoch int32
	var end int64
	err := p.replica.WithReplica(func(r *replication.Replica) error {
		var err error
		epoch, end, err = r.LeaderEpochEndOffset(rp.LeaderEpoch)
		return err
	})
	if err != nil {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return sp
	}
	if rp.LeaderEpoch < p.leaderEpoch() {
		if e, o, inBucket, err := cold.EpochEndOffset(ctx, tp(p), p.localLogStartOffset(), rp.LeaderEpoch); err == nil && inBucket {
			epoch, end = e, o
		}
	}
	sp.LeaderEpoch, sp.EndOffset = epoch, end
	return sp
}
