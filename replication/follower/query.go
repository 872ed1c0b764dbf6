package follower

// The follower's other requests: OffsetForLeaderEpoch for truncation
// (KIP-101) and ListOffsets(-4) to restart a log at the leader's local log
// start.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/peer"
)

// earliestLocalTimestamp is ListOffsets' timestamp -4 (KIP-405).
const earliestLocalTimestamp = -4

// sendQueries asks the leader OffsetForLeaderEpoch for every query and
// feeds each answer to its replica. A returned error is a connection-level
// failure (the queries are retried after the peer's back-off).
func (f *leaderFollower) sendQueries(cl peer.Client, queries []taskSnapshot) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.m.cfg.NodeID
	byTopic := map[string]int{}
	for _, s := range queries {
		i, ok := byTopic[s.p.Topic()]
		if !ok {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = s.p.Topic()
			i = len(req.Topics)
			byTopic[s.p.Topic()] = i
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = s.p.Index(), s.query.CurrentEpoch, s.query.Epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := f.request(cl, req, 0)
	if err != nil {
		return err
	}
	or, ok := resp.(*kmsg.OffsetForLeaderEpochResponse)
	if !ok {
		return fmt.Errorf("%w: OffsetForLeaderEpoch answered with %T", errPeerAnswer, resp)
	}
	f.m.counters.epochQueries.Add(1)
	f.applyEpochAnswers(or, queries)
	return nil
}

// applyEpochAnswers feeds each partition's answer to its replica. A query
// left unanswered, or whose answer the replica did not turn into a new
// task, is retried after a back-off.
func (f *leaderFollower) applyEpochAnswers(resp *kmsg.OffsetForLeaderEpochResponse, queries []taskSnapshot) {
	sent := make(map[fetchKey]taskSnapshot, len(queries))
	for _, s := range queries {
		sent[fetchKey{topic: s.p.Topic(), partition: s.p.Index()}] = s
	}
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			key := fetchKey{topic: rt.Topic, partition: rp.Partition}
			if s, ok := sent[key]; ok {
				delete(sent, key)
				f.applyEpochAnswer(s, rp)
			}
		}
	}
	for _, s := range sent {
		f.m.delay(s, kerr.UnknownServerError.Code)
	}
}

// applyEpochAnswer hands one answer to HandleEpochEndOffset; the Ready
// that follows truncates and calls follow or query, replacing the task.
func (f *leaderFollower) applyEpochAnswer(s taskSnapshot, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	if rp.ErrorCode != 0 {
		f.partitionError(s, rp.ErrorCode)
		return
	}
	answer := replication.EpochEndOffset{RequestedEpoch: s.query.Epoch, LeaderEpoch: rp.LeaderEpoch, EndOffset: rp.EndOffset}
	err := f.m.withReplica(s.p, func(r *replication.Replica) error {
		if r == nil || !f.m.isCurrent(s) {
			return errStaleTask
		}
		return r.HandleEpochEndOffset(answer)
	})
	if err != nil && err != errStaleTask {
		f.m.log.Warn("epoch answer not applied", "topic", s.p.Topic(), "partition", s.p.Index(),
			"leader", f.leader, "epoch", s.query.Epoch, "answer_epoch", rp.LeaderEpoch, "end_offset", rp.EndOffset, "err", err)
	}
	// A no-op when the answer replaced the task (the usual case).
	f.m.delay(s, kerr.UnknownServerError.Code)
}

// resetToLeaderStart handles OFFSET_OUT_OF_RANGE and
// OFFSET_MOVED_TO_TIERED_STORAGE: if the leader's local log starts above
// the fetch offset, the follower's log restarts empty there (its history
// is in the bucket or deleted) and fetching continues from it. The
// producer state at the new start comes from the tiered object ending
// exactly there when there is one (restart.go), else it is empty.
func (f *leaderFollower) resetToLeaderStart(cl peer.Client, s taskSnapshot) {
	start, err := f.leaderLocalStart(cl, s)
	if err != nil || start <= s.offset {
		if f.m.delay(s, kerr.OffsetOutOfRange.Code) {
			f.m.log.Warn("fetch offset out of range on the leader, but not below its local log start; retrying",
				"topic", s.p.Topic(), "partition", s.p.Index(), "leader", f.leader, "offset", s.offset, "leader_local_start", start, "err", err)
		}
		return
	}
	// Read before taking the replica mutex: it may GET from the bucket.
	snap := f.producerSnapshotAt(s, start)
	err = f.m.withReplica(s.p, func(r *replication.Replica) error {
		if err := f.checkFetch(r, s); err != nil {
			return err
		}
		// Under the replica mutex: no truncation or new state can
		// interleave. A rare event; its fsyncs are acceptable here.
		if err := f.resetLog(s, start, snap); err != nil {
			return err
		}
		// The leader's local log start is at or below its HW (only
		// tiered, hence committed, segments leave its disk).
		return f.fetched(r, appendedFetch{s: s, leo: start, leaderHW: start})
	})
	if err == nil {
		f.m.counters.resets.Add(1)
		f.m.log.Info("follower log restarted at the leader's local log start", "topic", s.p.Topic(),
			"partition", s.p.Index(), "leader", f.leader, "from", s.offset, "to", start)
	}
	f.fetchOutcome(s, err, nil)
}

// leaderLocalStart asks the leader for the partition's local log start
// (ListOffsets timestamp -4, as a replica).
func (f *leaderFollower) leaderLocalStart(cl peer.Client, s taskSnapshot) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.m.cfg.NodeID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = s.p.Topic()
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = s.p.Index(), s.epoch, earliestLocalTimestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := f.request(cl, req, 0)
	if err != nil {
		return -1, err
	}
	lr, ok := resp.(*kmsg.ListOffsetsResponse)
	if !ok {
		return -1, fmt.Errorf("%w: ListOffsets answered with %T", errPeerAnswer, resp)
	}
	for _, t := range lr.Topics {
		for _, p := range t.Partitions {
			if t.Topic != s.p.Topic() || p.Partition != s.p.Index() {
				continue
			}
			if p.ErrorCode != 0 {
				return -1, fmt.Errorf("%w: ListOffsets: %v", errPeerAnswer, kerr.ErrorForCode(p.ErrorCode))
			}
			return p.Offset, nil
		}
	}
	return -1, fmt.Errorf("%w: ListOffsets did not answer %s-%d", errPeerAnswer, s.p.Topic(), s.p.Index())
}
