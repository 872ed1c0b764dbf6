package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4.
//
// For each partition: the largest epoch <= the requested one that the log
// knows, and the end offset of that epoch (the start of the next epoch, or
// the LEO for the latest), from the leader-epoch checkpoint (KIP-101,
// KIP-279). An epoch older or newer than everything known answers (-1, -1),
// except the partition's current epoch, which ends at the LEO.
// CurrentLeaderEpoch (v2+) is checked first as in every data-path API
// (KIP-320). ReplicaID (v3+) will distinguish followers (issue 5); the
// answer is the same for both.
//
// Across tiers (issue 4): an epoch that ended in the bucket is answered
// from the tiered objects' leader-epoch ranges (coldpath.go,
// coldEpochEndOffset): the hot log's checkpoint no longer knows epochs
// whose segments were deleted locally. Later epochs come from the hot log.

func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			st.Partitions = append(st.Partitions, b.epochEndOffset(ctx, rt.Topic, rp))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// epochEndOffset answers one partition.
func (b *Broker) epochEndOffset(ctx context.Context, topic string, rp kmsg.OffsetForLeaderEpochRequestTopicPartition) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	sp.Partition = rp.Partition
	p, code := b.lookupPartition(topic, rp.Partition)
	if code == 0 {
		code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
	}
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	if current := p.leaderEpoch(); rp.LeaderEpoch == current {
		// Kafka records the leader's epoch in its cache when it becomes
		// leader, so the current epoch always ends at the LEO, even before
		// a batch of that epoch is appended.
		sp.LeaderEpoch, sp.EndOffset = current, p.log.LogEndOffset()
		return sp
	}
	epoch, end, inBucket, err := b.coldEpochEndOffset(ctx, p, rp.LeaderEpoch)
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

// checkLeaderEpoch implements KIP-320's fencing of a client's view of the
// leader: -1 skips the check; an older epoch is FENCED_LEADER_EPOCH (the
// client's metadata is stale); a newer one is UNKNOWN_LEADER_EPOCH (this
// broker has not caught up with the metadata yet; the client retries).
func checkLeaderEpoch(p *partition, requested int32) int16 {
	if requested < 0 {
		return 0
	}
	switch current := p.leaderEpoch(); {
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	case requested > current:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
