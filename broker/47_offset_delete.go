package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// OffsetDelete: v0. Offsets of topics a live consumer group subscribes to
// get GROUP_SUBSCRIBED_TO_TOPIC; a live group of another protocol type,
// NON_EMPTY_GROUP. Delete on the group is needed (top-level
// GROUP_AUTHORIZATION_FAILED), and Read on each topic
// (TOPIC_AUTHORIZATION_FAILED for its partitions, which are kept).

func (b *Broker) handleOffsetDelete(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !b.authz.allowedGroup(rc, auth.OpDelete, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	var tps []group.TopicPartition
	allowed := make([]bool, len(req.Topics))
	for ti, rt := range req.Topics {
		if allowed[ti] = b.authz.allowedTopic(rc, auth.OpRead, rt.Topic); !allowed[ti] {
			continue
		}
		for _, rp := range rt.Partitions {
			tps = append(tps, group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	top, codes := b.groups.DeleteOffsets(req.Group, tps)
	resp.ErrorCode = top
	if top != 0 {
		return resp, nil
	}
	i := 0
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			if allowed[ti] {
				sp.ErrorCode = codes[i]
				i++
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
