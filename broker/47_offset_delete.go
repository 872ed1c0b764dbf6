package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group"
)

// OffsetDelete: v0. Offsets of topics a live consumer group subscribes to
// get GROUP_SUBSCRIBED_TO_TOPIC; a live group of another protocol type,
// NON_EMPTY_GROUP.

func (b *Broker) handleOffsetDelete(_ context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var tps []group.TopicPartition
	for _, rt := range req.Topics {
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
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, codes[i]
			i++
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
