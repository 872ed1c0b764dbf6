package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/fetch"
)

// ListOffsets: v1-10.
//
// Behaviour per requested timestamp:
//   - -1 latest: the HW (the LSO under read_committed);
//   - -2 earliest: the log start offset;
//   - -3 max timestamp (KIP-734): the record with the largest timestamp
//     below the HW;
//   - -4 earliest local (KIP-405): the local log start, equal to the log
//     start until tiering (issue 4);
//   - -5 latest tiered (KIP-1005): offset -1, timestamp -1, as Kafka answers
//     for a topic without remote storage, until tiering;
//   - t >= 0 (or any other value): the first record whose timestamp is >= t
//     below the HW (LSO under read_committed); none gives offset -1 and
//     timestamp -1.
//
// Every answer carries the partition's current leader epoch: on a single
// node it is >= the epoch of the returned offset's batch, so a client's
// OffsetForLeaderEpoch validation of it never reports truncation. Exact
// per-offset epochs come with replication (issue 5).
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
		for pi := range rt.Partitions {
			st.Partitions = append(st.Partitions, b.listPartitionOffset(rt.Topic, &rt.Partitions[pi], iso))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listPartitionOffset answers one partition.
func (b *Broker) listPartitionOffset(topic string, rp *kmsg.ListOffsetsRequestTopicPartition, iso fetch.IsolationLevel) kmsg.ListOffsetsResponseTopicPartition {
	sp := kmsg.NewListOffsetsResponseTopicPartition()
	sp.Partition = rp.Partition
	p, code := b.lookupPartition(topic, rp.Partition)
	if code == 0 {
		code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
	}
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	offset, timestamp, err := listOffset(p, rp.Timestamp, iso)
	if err != nil {
		sp.ErrorCode = dataPathErrorCode(err)
		if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
			b.log.Warn("list offsets failed", "topic", topic, "partition", rp.Partition, "err", err)
		}
		return sp
	}
	sp.Offset, sp.Timestamp = offset, timestamp
	if offset >= 0 {
		sp.LeaderEpoch = p.leaderEpoch()
	}
	return sp
}

// listOffset resolves one ListOffsets timestamp to (offset, timestamp);
// (-1, -1) when there is no such offset.
func listOffset(p *partition, ts int64, iso fetch.IsolationLevel) (int64, int64, error) {
	visible := p.highWatermark()
	if iso == fetch.ReadCommitted {
		visible = min(p.lastStableOffset(), visible)
	}
	switch ts {
	case listOffsetsLatest:
		return visible, -1, nil
	case listOffsetsEarliest, listOffsetsEarliestLocal:
		// TODO(issue 4): -2 is the start of the whole log (tier included),
		// -4 the start of the local part.
		return p.log.LogStartOffset(), -1, nil
	case listOffsetsLatestTiered:
		return -1, -1, nil
	case listOffsetsMaxTimestamp:
		res, ok, err := p.log.MaxTimestamp(visible)
		if err != nil || !ok {
			return -1, -1, err
		}
		return res.Offset, res.Timestamp, nil
	}
	res, ok, err := p.log.OffsetForTimestamp(ts, visible)
	if err != nil || !ok || res.Offset >= visible {
		return -1, -1, err
	}
	return res.Offset, res.Timestamp, nil
}
