package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier"
)

// ListOffsets: v1-10.
//
// Behaviour per requested timestamp:
//   - -1 latest: the HW (the LSO under read_committed);
//   - -2 earliest: the log start offset across both tiers (the first
//     offset in the bucket when history is tiered);
//   - -3 max timestamp (KIP-734): the record with the largest timestamp
//     below the HW, across both tiers (a tiered object's footer names its
//     max-timestamp offset; the earlier record wins a tie);
//   - -4 earliest local (KIP-405): the hot log's start offset;
//   - -5 latest tiered (KIP-1005): the last offset in the bucket, with the
//     leader epoch of its batch; offset -1, timestamp -1 when nothing is
//     tiered (as Kafka answers for a topic without remote storage);
//   - t >= 0 (or any other value): the first record whose timestamp is >= t
//     below the HW (LSO under read_committed), at or after the log start;
//     objects below the local log start are searched first (their time
//     index, then their batches through the cold cache), then the hot log;
//     none gives offset -1 and timestamp -1.
//
// Describe on the topic is needed (TOPIC_AUTHORIZATION_FAILED otherwise).
// Only the leader answers (NOT_LEADER_OR_FOLLOWER). A replica id >= 0
// (a follower or a debugging tool) gets the LEO for -1.
//
// Diskless topics (diskless_wiring.go) are answered by any broker from the
// committed coordinates: every committed offset is stable, so latest is the
// log end under both isolation levels; earliest and earliest-local are the
// log start (nothing is local); latest-tiered is the last committed offset
// (everything is in the bucket); leader epoch 0.
//
// Every answer but latest-tiered carries the partition's current leader
// epoch, which is >= the epoch of the returned offset's batch, so a
// client's OffsetForLeaderEpoch validation of it never reports truncation
// (Kafka answers the batch's own epoch).
// v11 (-6, earliest pending upload) is left for tiering.

// Special ListOffsets timestamps.
const (
	listOffsetsLatest        = -1
	listOffsetsEarliest      = -2
	listOffsetsMaxTimestamp  = -3
	listOffsetsEarliestLocal = -4
	listOffsetsLatestTiered  = -5
)

func (b *Broker) handleListOffsets(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	iso := fetch.IsolationLevel(req.IsolationLevel)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authz.allowedTopic(rc, auth.OpDescribe, rt.Topic)
		for pi := range rt.Partitions {
			if !allowed {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rt.Partitions[pi].Partition, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			st.Partitions = append(st.Partitions, b.listPartitionOffset(ctx, rt.Topic, &rt.Partitions[pi], iso, req.ReplicaID >= 0))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listPartitionOffset answers one partition.
func (b *Broker) listPartitionOffset(ctx context.Context, topic string, rp *kmsg.ListOffsetsRequestTopicPartition,
	iso fetch.IsolationLevel, replica bool,
) kmsg.ListOffsetsResponseTopicPartition {
	if tp, code, ok := b.disklessReadPart(false, topic, [16]byte{}, rp.Partition); ok {
		return b.listDisklessOffset(ctx, tp, code, rp)
	}
	sp := kmsg.NewListOffsetsResponseTopicPartition()
	sp.Partition = rp.Partition
	p, code := b.parts.lookup(topic, rp.Partition)
	if code == 0 {
		code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
	}
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	if replica && rp.Timestamp == listOffsetsLatest {
		// A replica (Kafka's debug / follower id) sees the LEO, not the HW.
		sp.Offset, sp.Timestamp, sp.LeaderEpoch = p.log.LogEndOffset(), -1, p.leaderEpoch()
		return sp
	}
	offset, timestamp, epoch, err := listOffset(ctx, b.coldSrc, p, rp.Timestamp, iso)
	if err != nil {
		sp.ErrorCode = dataPathErrorCode(err)
		if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
			b.log.Warn("list offsets failed", "topic", topic, "partition", rp.Partition, "err", err)
		}
		return sp
	}
	sp.Offset, sp.Timestamp = offset, timestamp
	if offset >= 0 {
		sp.LeaderEpoch = epoch
	}
	return sp
}

// listOffset resolves one ListOffsets timestamp to (offset, timestamp,
// leader epoch); (-1, -1) when there is no such offset.
func listOffset(ctx context.Context, coldSrc tier.ColdSource, p *partition, ts int64, iso fetch.IsolationLevel) (int64, int64, int32, error) {
	visible := p.highWatermark()
	if iso == fetch.ReadCommitted {
		visible = min(p.lastStableOffset(), visible)
	}
	epoch := p.leaderEpoch()
	switch ts {
	case listOffsetsLatest:
		return visible, -1, epoch, nil
	case listOffsetsEarliest:
		return p.logStartOffset(), -1, epoch, nil
	case listOffsetsEarliestLocal:
		return p.localLogStartOffset(), -1, epoch, nil
	case listOffsetsLatestTiered:
		entries := p.manifest.Segments(p.topicID, p.index)
		if len(entries) == 0 {
			return -1, -1, epoch, nil
		}
		last := entries[len(entries)-1]
		return last.LastOffset, -1, last.LeaderEpoch, nil
	case listOffsetsMaxTimestamp:
		res, ok, err := maxTimestampAcrossTiers(ctx, coldSrc, p, visible)
		if err != nil || !ok {
			return -1, -1, epoch, err
		}
		return res.Offset, res.Timestamp, epoch, nil
	}
	res, ok, err := offsetForTimestampAcrossTiers(ctx, coldSrc, p, ts, visible)
	if err != nil || !ok || res.Offset >= visible {
		return -1, -1, epoch, err
	}
	return res.Offset, res.Timestamp, epoch, nil
}

// offsetForTimestampAcrossTiers searches the bucket's part first (it holds
// the earlier offsets), then the hot log.
func offsetForTimestampAcrossTiers(ctx context.Context, coldSrc tier.ColdSource, p *partition, ts, visible int64) (hotlog.OffsetTime, bool, error) {
	res, ok, err := coldSrc.OffsetForTimestamp(ctx, tp(p), p.localLogStartOffset(), ts, p.logStartOffset())
	if err != nil || ok {
		return res, ok, err
	}
	return p.log.OffsetForTimestamp(ts, visible)
}

// maxTimestampAcrossTiers: the tiered maximum wins unless the hot log has a
// strictly larger timestamp (on a tie the earlier offset is Kafka's answer).
func maxTimestampAcrossTiers(ctx context.Context, coldSrc tier.ColdSource, p *partition, visible int64) (hotlog.OffsetTime, bool, error) {
	local, localOK, err := p.log.MaxTimestamp(visible)
	if err != nil {
		return local, false, err
	}
	cold, coldOK, err := coldSrc.MaxTimestamp(ctx, tp(p), p.localLogStartOffset())
	if err != nil {
		return cold, false, err
	}
	if coldOK && (!localOK || cold.Timestamp >= local.Timestamp) {
		return cold, true, nil
	}
	return local, localOK, nil
}
