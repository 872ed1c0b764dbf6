package broker

// Fetch from followers (a replica id >= 0) and the leader hints of fetch
// answers. See 01_fetch.go for the request as a whole.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/tier"
)

// followerFetchPartition resolves a follower's partition and reports its
// fetch offset to the replica. The replica's answer is the partition's
// answer: NOT_LEADER_OR_FOLLOWER (not leading, or not a replica),
// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (CurrentLeaderEpoch older /
// newer), OFFSET_OUT_OF_RANGE (past the LEO). An offset below the local
// log start is not reported: OFFSET_MOVED_TO_TIERED_STORAGE when the bucket
// holds it (the follower then starts at the leader's local log start),
// OFFSET_OUT_OF_RANGE when it is below the log start altogether.
func (b *Broker) followerFetchPartition(version int16, replicaID int32, rt *kmsg.FetchRequestTopic,
	rp *kmsg.FetchRequestTopicPartition,
) (*partition, int16) {
	var p *partition
	var code int16
	if version >= 13 {
		p, code = b.parts.lookupByID(rt.TopicID, rp.Partition)
	} else {
		p, code = b.parts.lookup(rt.Topic, rp.Partition)
	}
	if code != 0 {
		return nil, code
	}
	if rp.FetchOffset < p.localLogStartOffset() {
		if rp.FetchOffset >= p.logStartOffset() {
			return nil, kerr.OffsetMovedToTieredStorage.Code
		}
		return nil, kerr.OffsetOutOfRange.Code
	}
	err := p.replica.WithReplica(func(r *replication.Replica) error {
		return r.FollowerFetch(replicaID, rp.FetchOffset, rp.CurrentLeaderEpoch)
	})
	if err != nil {
		if code, ok := replicationErrorCode(err); ok {
			return nil, code
		}
		return nil, dataPathErrorCode(err)
	}
	return p, 0
}

// fillFollowerPositions replaces the read's positions (which saw the LEO as
// the visible end) with the leader's HW, LSO and Kafka's log start. The HW
// may be read past the records returned: the follower caps it at its LEO.
func fillFollowerPositions(sp *kmsg.FetchResponseTopicPartition, p *partition) {
	sp.HighWatermark = p.highWatermark()
	sp.LastStableOffset = min(p.lastStableOffset(), sp.HighWatermark)
	sp.LogStartOffset = p.logStartOffset()
}

// followerSource adapts a leader's local log for a follower's read: the
// visible end is the LEO, and only the hot log is read (a follower never
// replicates from the bucket).
type followerSource struct {
	p     *partition
	reads *bufpool.Set     // nil: reads are not pooled
	cold  *tier.ColdReader // told of every read (its governor); nil: tiering off
}

var _ fetch.Partition = followerSource{}

// Changed wakes the follower's long poll when the LEO (or log start) moves.
func (s followerSource) Changed() <-chan struct{} { return s.p.log.Changed() }

// Positions reads the log start first and the LEO last (both only move up
// on a leader).
func (s followerSource) Positions() fetch.Positions {
	logStart := s.p.localLogStartOffset()
	leo := s.p.log.LogEndOffset()
	return fetch.Positions{LogStart: min(logStart, leo), LastStable: leo, HighWatermark: leo, LogEnd: leo}
}

func (s followerSource) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	s.cold.NoteHot()
	return readPooled(s.p, s.reads, offset, maxBytes, upTo)
}

// addFetchLeaders fills, for each NOT_LEADER_OR_FOLLOWER / FENCED partition,
// CurrentLeader (v12+) and the leaders' endpoints (v16+, KIP-951).
func (b *Broker) addFetchLeaders(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	if resp.Version < 12 {
		return
	}
	var leaders leaderEndpoints
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			sp := &rt.Partitions[pi]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code && sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
				continue
			}
			var leader, epoch int32
			if req.Version >= 13 {
				leader, epoch = b.leaderHintByID(rt.TopicID, sp.Partition)
			} else {
				leader, epoch = b.leaderHintByName(rt.Topic, sp.Partition)
			}
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
			leaders.add(leader)
		}
	}
	if resp.Version >= 16 {
		resp.Brokers = leaders.fetchBrokers(b)
	}
}
