package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/fetch/session"
)

// Incremental fetch sessions (KIP-227): the rules live in fetch/session;
// this file translates a Fetch request to and from them.

// fetchSession is a request's session context and, for an incremental
// fetch, where each partition of the rebuilt request sits in the session
// (order[i] is the session index of request partition i, in request order).
type fetchSession struct {
	ctx   *session.Context
	order []int
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
	fs := fetchSession{ctx: ctx}
	if sreq.Epoch > 0 {
		req.Topics, fs.order = requestTopics(ctx.Partitions())
	}
	return fs, 0
}

// requestTopics lays the session's partitions out as request topics, each
// topic once (in order of first appearance), and returns the session index
// of each request partition.
func requestTopics(parts []session.Partition) ([]kmsg.FetchRequestTopic, []int) {
	type topicKey struct {
		name string
		id   [16]byte
	}
	byTopic := map[topicKey][]int{}
	var topics []topicKey
	for i, p := range parts {
		k := topicKey{p.Topic, p.TopicID}
		if _, seen := byTopic[k]; !seen {
			topics = append(topics, k)
		}
		byTopic[k] = append(byTopic[k], i)
	}
	out := make([]kmsg.FetchRequestTopic, 0, len(topics))
	order := make([]int, 0, len(parts))
	for _, k := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = k.name, k.id
		for _, i := range byTopic[k] {
			p := parts[i]
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = p.Partition, p.FetchOffset, p.LogStartOffset, p.MaxBytes
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p.CurrentLeaderEpoch, p.LastFetchedEpoch
			rt.Partitions = append(rt.Partitions, rp)
			order = append(order, i)
		}
		out = append(out, rt)
	}
	return out, order
}

// finish reports the answer to the session, sets its session id and drops
// the partitions an incremental answer need not carry.
func (fs fetchSession) finish(resp *kmsg.FetchResponse) {
	n := len(fs.ctx.Partitions())
	results := make([]session.Result, n)
	flat := 0
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			i := flat
			if fs.order != nil {
				i = fs.order[flat]
			}
			results[i] = session.Result{HighWatermark: sp.HighWatermark, LastStableOffset: sp.LastStableOffset,
				LogStartOffset: sp.LogStartOffset, HasRecords: len(sp.RecordBatches) > 0, ErrorCode: sp.ErrorCode}
			flat++
		}
	}
	id, include := fs.ctx.Finish(results)
	resp.SessionID = id
	if fs.order == nil {
		return // a full answer carries every partition
	}
	flat = 0
	topics := resp.Topics[:0]
	for _, st := range resp.Topics {
		parts := st.Partitions[:0]
		for _, sp := range st.Partitions {
			if include[fs.order[flat]] {
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
