package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// Fetch: v4-16. The reading, limits and long poll live in package fetch;
// this file resolves partitions and encodes the answer.
//
// Behaviour:
//   - v13+ addresses topics by id (UNKNOWN_TOPIC_ID), earlier versions by
//     name (UNKNOWN_TOPIC_OR_PARTITION).
//   - CurrentLeaderEpoch (v9+) is checked: FENCED_LEADER_EPOCH if older than
//     the partition's, UNKNOWN_LEADER_EPOCH if newer.
//   - Fetch sessions (KIP-227, fetch_sessions.go and fetch/session): a
//     full fetch with epoch 0 opens a session when the cache admits it; an
//     incremental fetch reads every partition of its session and answers
//     only those with news; a sessionless fetch (epoch -1) is served as
//     named, whatever its session id (a session it names is closed).
//   - Any partition error answers the fetch at once, as Kafka does.
//   - read_committed (IsolationLevel 1) reads up to the LSO, min(first
//     offset of the earliest open transaction, HW) (partitions.go), and
//     lists the aborted transactions (producer id, first offset) that
//     overlap the returned batches, from the local log's aborted-
//     transaction index (hotlog/doc.go, "Transactions") or, for cold reads,
//     from the tiered objects' sections (cold_wiring.go, tier.ColdSource). Every answer carries
//     LastStableOffset.
//   - Only the leader serves fetches; others answer NOT_LEADER_OR_FOLLOWER
//     with CurrentLeader (v12+) and the leaders' endpoints (v16+).
//   - A replica id >= 0 (ReplicaID before v15, ReplicaState.ID after; see
//     fetchReplicaID) is a follower (replica_fetch.go): its fetch offset
//     goes to the replica first (FollowerFetch: its error is the answer,
//     and it may move the HW and the ISR), then it reads up to the LEO,
//     not the HW, from the local log only: an offset below the local log
//     start that the bucket holds answers OFFSET_MOVED_TO_TIERED_STORAGE.
//     The answer carries the leader's HW and Kafka's log start.
//   - Authorization (authz.go): a consumer needs Read on each
//     topic, a follower ClusterAction on the Cluster; otherwise every
//     partition of the topic is TOPIC_AUTHORIZATION_FAILED, untouched (a
//     refused follower fetch moves no replica state).
//   - Tiering: the log start offset is the start across both
//     tiers; offsets below the local log start are read from the bucket
//     (cold_wiring.go, tier.ColdSource) without holding up the request's hot partitions (see
//     package fetch, "Cold reads"). A damaged or unreadable object is
//     KAFKA_STORAGE_ERROR for that partition; its bytes are never served.
//   - Diskless partitions (diskless_wiring.go) are read by any broker from
//     its index of committed coordinates; an offset past the index's log
//     end that etcd's heads still hold (the index lags) is
//     OFFSET_NOT_AVAILABLE, not OFFSET_OUT_OF_RANGE.

// fetchSlot locates one requested partition in the response; follower is
// the partition a follower's read was planned for (nil otherwise).
type fetchSlot struct {
	topic, partition int
	follower         *partition
	diskless         *metadata.TierPartition // the diskless partition read, if it is one
}

func (b *Broker) handleFetch(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	fs, code := b.beginFetchSession(req)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	rc.reads = &bufpool.Set{}
	freq, slots := b.planFetch(rc, req, resp)
	b.holdLaggingDisklessFetches(ctx, &freq, slots, resp)
	fetcher, err := fetch.New(fetch.Config{})
	if err != nil {
		return nil, err
	}
	// A shutdown's drain ends the long poll: the answer is what is there.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if b.drainStart != nil {
		defer context.AfterFunc(b.drainStart, cancel)()
	}
	results := fetcher.Fetch(ctx, freq)
	for i, res := range results {
		if freq.Partitions[i].Partition == nil {
			continue // answered by planFetch
		}
		sp := &resp.Topics[slots[i].topic].Partitions[slots[i].partition]
		fillFetchPartition(sp, res, freq.Isolation)
		if p := slots[i].follower; p != nil {
			fillFollowerPositions(sp, p)
		}
	}
	b.metrics.recordFetchBytes(resp, slots, results, b.parts.topicName)
	if replica := fetchReplicaID(req); replica >= 0 {
		if n := b.metrics.recordMoveBytes(replica, slots, results); n > 0 {
			b.moves.charge(n)
		}
	}
	fs.finish(resp)
	b.addFetchLeaders(req, resp)
	return resp, nil
}

// fetchReplicaID is the requester's replica id: -1 for consumers, a broker id
// for followers (a top-level field before v15, in ReplicaState after).
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// fetchAuthCode is a topic's authorization answer (0: allowed): a
// follower (replica id >= 0) needs ClusterAction on the Cluster, which
// only brokers hold, so no client can pose as a replica, read past the HW
// or move the HW and ISR (CVE-2018-1288); a consumer needs Read on the
// topic. Both are TOPIC_AUTHORIZATION_FAILED, as Kafka answers. An unknown
// topic id is left to the lookup (UNKNOWN_TOPIC_ID).
func (b *Broker) fetchAuthCode(rc *requestContext, req *kmsg.FetchRequest, rt *kmsg.FetchRequestTopic, followerAllowed bool) int16 {
	if !b.cfg.Authorizer {
		return 0
	}
	if fetchReplicaID(req) >= 0 {
		if followerAllowed {
			return 0
		}
		return kerr.TopicAuthorizationFailed.Code
	}
	return b.topicAuthCode(rc, auth.OpRead, req.Version >= 13, rt.Topic, rt.TopicID)
}

// planFetch resolves every requested partition, laying out the response
// (errors filled in) and the fetch.Request in the same order.
func (b *Broker) planFetch(rc *requestContext, req *kmsg.FetchRequest, resp *kmsg.FetchResponse) (fetch.Request, []fetchSlot) {
	freq := fetch.Request{
		MinBytes:  int(req.MinBytes),
		MaxBytes:  int(req.MaxBytes),
		MaxWait:   time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond,
		Isolation: fetch.IsolationLevel(req.IsolationLevel),
	}
	if freq.Isolation != fetch.ReadCommitted {
		freq.Isolation = fetch.ReadUncommitted
	}
	replicaID := fetchReplicaID(req)
	if replicaID >= 0 {
		freq.Isolation = fetch.ReadUncommitted // a follower reads up to the LEO
	}
	followerAllowed := replicaID >= 0 && b.authz.allowedCluster(rc, auth.OpClusterAction)
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	// Sized up front: a consumer of many partitions names them all in every
	// fetch, and growing these slices was most of a fetch's garbage.
	freq.Partitions = make([]fetch.PartitionRequest, 0, n)
	slots := make([]fetchSlot, 0, n)
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		denied := b.fetchAuthCode(rc, req, rt, followerAllowed)
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.RecordBatches = []byte{} // librdkafka reads a null record set as corrupt
			pr := fetch.PartitionRequest{Offset: rp.FetchOffset, MaxBytes: int(rp.PartitionMaxBytes)}
			slot := fetchSlot{topic: ti, partition: pi}
			if denied != 0 {
				sp.ErrorCode, sp.HighWatermark = denied, -1
			} else if replicaID >= 0 {
				p, code := b.followerFetchPartition(req.Version, replicaID, rt, rp)
				if code != 0 {
					sp.ErrorCode, sp.HighWatermark = code, -1
				} else if ok, limit := b.moves.allow(p, replicaID); !ok {
					fillFollowerPositions(&sp, p) // positions only: this move's bytes wait for the throttle
				} else {
					if limit > 0 && (pr.MaxBytes <= 0 || limit < pr.MaxBytes) {
						pr.MaxBytes = limit
					}
					pr.Partition, slot.follower = followerSource{p, rc.reads, b.cold}, p
				}
			} else if tp, code, ok := b.disklessReadPart(req.Version >= 13, rt.Topic, rt.TopicID, rp.Partition); ok {
				if code != 0 {
					sp.ErrorCode, sp.HighWatermark = code, -1
				} else {
					pr.Partition, slot.diskless = b.disklessFetchPartition(tp), &tp
				}
			} else if p, code := b.fetchablePartition(req.Version, rt, rp); code != 0 {
				sp.ErrorCode, sp.HighWatermark = code, -1
			} else {
				pr.Partition = b.fetchPartition(p, rc.reads)
			}
			freq.Partitions = append(freq.Partitions, pr)
			slots = append(slots, slot)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return freq, slots
}

// fetchablePartition looks a partition up and checks the leader epoch.
func (b *Broker) fetchablePartition(version int16, rt *kmsg.FetchRequestTopic, rp *kmsg.FetchRequestTopicPartition) (*partition, int16) {
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
	if code := checkLeaderEpoch(p, rp.CurrentLeaderEpoch); code != 0 {
		return nil, code
	}
	return p, 0
}

// fillFetchPartition encodes one fetch.Result.
func fillFetchPartition(sp *kmsg.FetchResponseTopicPartition, res fetch.Result, iso fetch.IsolationLevel) {
	sp.HighWatermark = res.HighWatermark
	sp.LastStableOffset = res.LastStableOffset
	sp.LogStartOffset = res.LogStartOffset
	sp.RecordBatches = res.Records
	if iso == fetch.ReadCommitted {
		sp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(res.AbortedTxns))
		for _, a := range res.AbortedTxns {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			sp.AbortedTransactions = append(sp.AbortedTransactions, at)
		}
	}
	sp.ErrorCode = dataPathErrorCode(res.Err)
}

// fetchSource adapts a local partition to fetch.Partition. Its reads go
// into pooled buffers kept in reads (nil: not pooled).
type fetchSource struct {
	p     *partition
	reads *bufpool.Set
	cold  *tier.ColdReader // told of every hot read (its governor); nil: tiering off
}

var _ fetch.Partition = fetchSource{}

func (s fetchSource) Changed() <-chan struct{} { return s.p.changed() }

// Positions reads the log start first and the LEO last, so that, with
// offsets only moving up, LogStart <= HW <= LogEnd holds in the snapshot.
func (s fetchSource) Positions() fetch.Positions {
	logStart := s.p.logStartOffset() // across tiers: the bucket's part is readable
	hw := s.p.highWatermark()
	// An open transaction whose start retention deleted holds the LSO at
	// the log start (Kafka clamps the same way).
	lso := max(min(s.p.lastStableOffset(), hw), min(logStart, hw))
	return fetch.Positions{
		LogStart:      min(logStart, hw),
		LastStable:    lso,
		HighWatermark: hw,
		LogEnd:        max(s.p.log.LogEndOffset(), hw),
	}
}

func (s fetchSource) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	s.cold.NoteHot()
	return readPooled(s.p, s.reads, offset, maxBytes, upTo)
}

// readPooled reads p's local log, into a pooled buffer handed to reads
// when reads is not nil.
func readPooled(p *partition, reads *bufpool.Set, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	if reads == nil {
		return p.log.Read(offset, maxBytes, upTo)
	}
	data, backing, err := p.log.ReadPooled(offset, maxBytes, upTo)
	reads.Add(backing)
	return data, err
}

// AbortedTxns lists the local log's aborts overlapping [from, to)
// (fetch.TxnPartition).
func (s fetchSource) AbortedTxns(from, to int64) []hotlog.AbortedTxn {
	return s.p.log.AbortedTxns(from, to)
}
