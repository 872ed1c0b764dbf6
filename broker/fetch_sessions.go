package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/fetch/session"
)

// Incremental fetch sessions (KIP-227): the rules live in fetch/session;
// this file translates a Fetch request to and from them.

// fetchSession is a request's session context; incremental is set when
// req.Topics was rebuilt from the session (in the session's order), whose
// answer carries only the partitions with news.
type fetchSession struct {
	ctx         *session.Context
	incremental bool
}

// beginFetchSession starts req's session and, for an incremental fetch,
// replaces req.Topics with every partition of the session, grouped by
// topic. A non-zero code is the answer's top-level error.
func (b *Broker) beginFetchSession(req *kmsg.FetchRequest) (fetchSession, int16) {
	sreq := session.Request{ID: req.SessionID, Epoch: req.SessionEpoch, Privileged: fetchReplicaID(req) >= 0}
	if req.Version < 7 {
		sreq.ID, sreq.Epoch = 0, session.FinalEpoch // sessions begin at v7
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			sreq.Partitions = append(sreq.Partitions, session.Partition{
				Key: session.Key{Topic: rt.Topic, TopicID: rt.TopicID, Partition: rp.Partition},
				Params: session.Params{FetchOffset: rp.FetchOffset, LogStartOffset: rp.LogStartOffset, MaxBytes: rp.PartitionMaxBytes,
					CurrentLeaderEpoch: rp.CurrentLeaderEpoch, LastFetchedEpoch: rp.LastFetchedEpoch},
			})
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			sreq.Forgotten = append(sreq.Forgotten, session.Key{Topic: ft.Topic, TopicID: ft.TopicID, Partition: p})
		}
	}
	ctx, err := b.fetchSessions.Begin(sreq)
	switch {
	case errors.Is(err, session.ErrSessionNotFound):
		return fetchSession{}, kerr.FetchSessionIDNotFound.Code
	case errors.Is(err, session.ErrInvalidEpoch):
		return fetchSession{}, kerr.InvalidFetchSessionEpoch.Code
	}
	fs := fetchSession{ctx: ctx, incremental: sreq.Epoch > 0}
	if fs.incremental {
		req.Topics = requestTopics(ctx.Partitions())
	}
	return fs, 0
}

// requestTopics lays the session's partitions out as request topics: each
// topic's partitions are adjacent in a session (fetch/session), so one pass
// keeps the session's order.
func requestTopics(parts []session.Partition) []kmsg.FetchRequestTopic {
	var out []kmsg.FetchRequestTopic
	for i, p := range parts {
		if i == 0 || p.Topic != parts[i-1].Topic || p.TopicID != parts[i-1].TopicID {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.Topic, p.TopicID
			rt.Partitions = make([]kmsg.FetchRequestTopicPartition, 0, topicRun(parts[i:]))
			out = append(out, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = p.Partition, p.FetchOffset, p.LogStartOffset, p.MaxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p.CurrentLeaderEpoch, p.LastFetchedEpoch
		rt := &out[len(out)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return out
}

// topicRun is how many partitions at the head of parts share its topic.
func topicRun(parts []session.Partition) int {
	n := 1
	for n < len(parts) && parts[n].Topic == parts[0].Topic && parts[n].TopicID == parts[0].TopicID {
		n++
	}
	return n
}

// finish reports the answer to the session, sets its session id and drops
// the partitions an incremental answer need not carry. The answer's
// partitions are in the order of ctx.Partitions().
func (fs fetchSession) finish(resp *kmsg.FetchResponse) {
	if fs.ctx.Sessionless() { // followers' fetches, and clients without sessions
		resp.SessionID = 0
		return
	}
	results := make([]session.Result, 0, len(fs.ctx.Partitions()))
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			results = append(results, session.Result{HighWatermark: sp.HighWatermark, LastStableOffset: sp.LastStableOffset,
				LogStartOffset: sp.LogStartOffset, HasRecords: len(sp.RecordBatches) > 0, ErrorCode: sp.ErrorCode})
		}
	}
	id, include := fs.ctx.Finish(results)
	resp.SessionID = id
	if !fs.incremental {
		return // a full answer carries every partition
	}
	flat := 0
	topics := resp.Topics[:0]
	for _, st := range resp.Topics {
		parts := st.Partitions[:0]
		for _, sp := range st.Partitions {
			if include[flat] {
				parts = append(parts, sp)
			}
			flat++
		}
		if st.Partitions = parts; len(parts) > 0 {
			topics = append(topics, st)
		}
	}
	resp.Topics = topics
}
