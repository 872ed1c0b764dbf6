package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// OffsetFetch: v0-9. v0-7 ask one group, v8+ several. Topics null (v2+)
// asks for every committed offset of the group. A partition without a
// commit answers offset -1. require_stable (v7+): a partition with a
// pending transactional commit (TxnOffsetCommit awaiting its marker)
// answers UNSTABLE_OFFSET_COMMIT, so the consumer retries. Describe on the
// group is needed (GROUP_AUTHORIZATION_FAILED), and Describe on a topic to
// see its offsets: asked-for partitions of other topics answer
// TOPIC_AUTHORIZATION_FAILED, and "every offset" leaves those topics out.
// v9 (KIP-848) names the member: in a consumer-protocol group it must be
// current at that epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); no member
// with epoch -1 (admin clients) is always answered.

func (b *Broker) handleOffsetFetch(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, b.offsetFetchGroup(rc, rg, req.RequireStable))
		}
		return resp, nil
	}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = req.Group
	if req.Topics != nil {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
	}
	for _, rt := range req.Topics {
		rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: rt.Topic, Partitions: rt.Partitions})
	}
	g := b.offsetFetchGroup(rc, rg, req.RequireStable)
	resp.ErrorCode = g.ErrorCode
	for _, gt := range g.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Version < 2 && g.ErrorCode != 0 {
		setOffsetFetchV0Error(resp, req, g.ErrorCode)
	}
	return resp, nil
}

// setOffsetFetchV0Error: v0-1 have no top-level code; it goes on every
// requested partition.
func setOffsetFetchV0Error(resp *kmsg.OffsetFetchResponse, req *kmsg.OffsetFetchRequest, code int16) {
	resp.Topics = nil
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.ErrorCode = p, -1, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

// offsetFetchGroup answers one group (v8+ form).
func (b *Broker) offsetFetchGroup(rc *requestContext, rg kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = rg.Group
	if !b.authz.allowedGroup(rc, auth.OpDescribe, rg.Group) {
		g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return g
	}
	var tps []group.TopicPartition
	if rg.Topics != nil {
		tps = []group.TopicPartition{}
		for _, rt := range rg.Topics {
			for _, p := range rt.Partitions {
				tps = append(tps, group.TopicPartition{Topic: rt.Topic, Partition: p})
			}
		}
	}
	// The pending transactional commits are read before the offsets: a
	// transaction's marker moves its offsets from pending to committed in
	// one step, so a partition not pending then has its committed offset
	// in what is read next. Read the other way round, a marker landing in
	// between left the old offset (-1) with nothing marked unstable.
	var unstable map[group.TopicPartition]bool
	if requireStable {
		unstable = b.groups.Unstable(rg.Group)
	}
	offsets, code := b.groups.FetchOffsetsAs(rg.Group, tps, rg.MemberID, rg.MemberEpoch)
	if code != 0 {
		g.ErrorCode = code
		return g
	}
	if tps == nil {
		for tp := range offsets {
			if b.authz.allowedQuiet(rc, auth.OpDescribe, auth.ResourceTopic, tp.Topic) {
				tps = append(tps, tp)
			}
		}
		slices.SortFunc(tps, func(a, b group.TopicPartition) int {
			if c := compareStrings(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition) - int(b.Partition)
		})
	}
	g.Topics = offsetFetchTopics(tps, offsets)
	if requireStable {
		markUnstable(g.Topics, unstable)
	}
	b.hideUnauthorizedOffsets(rc, g.Topics)
	return g
}

// hideUnauthorizedOffsets answers TOPIC_AUTHORIZATION_FAILED, without the
// offset, for the partitions of topics the principal may not Describe.
func (b *Broker) hideUnauthorizedOffsets(rc *requestContext, topics []kmsg.OffsetFetchResponseGroupTopic) {
	for ti := range topics {
		if b.authz.allowedTopic(rc, auth.OpDescribe, topics[ti].Topic) {
			continue
		}
		for pi := range topics[ti].Partitions {
			p := &topics[ti].Partitions[pi]
			p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
		}
	}
}

// offsetFetchTopics groups answers by topic, in request order.
func offsetFetchTopics(tps []group.TopicPartition, offsets map[group.TopicPartition]group.Offset) []kmsg.OffsetFetchResponseGroupTopic {
	var out []kmsg.OffsetFetchResponseGroupTopic
	index := map[string]int{}
	for _, tp := range tps {
		i, ok := index[tp.Topic]
		if !ok {
			i = len(out)
			index[tp.Topic] = i
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = tp.Topic
			out = append(out, t)
		}
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = tp.Partition, -1, -1, kmsg.StringPtr("")
		if o, ok := offsets[tp]; ok {
			p.Offset, p.LeaderEpoch, p.Metadata = o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
		}
		out[i].Partitions = append(out[i].Partitions, p)
	}
	return out
}

// markUnstable answers UNSTABLE_OFFSET_COMMIT (offset -1) for partitions
// with a pending transactional commit.
func markUnstable(topics []kmsg.OffsetFetchResponseGroupTopic, unstable map[group.TopicPartition]bool) {
	if len(unstable) == 0 {
		return
	}
	for ti := range topics {
		for pi := range topics[ti].Partitions {
			p := &topics[ti].Partitions[pi]
			if unstable[group.TopicPartition{Topic: topics[ti].Topic, Partition: p.Partition}] {
				p.Offset, p.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
			}
		}
	}
}
