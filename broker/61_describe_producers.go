package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/hotlog"
)

// DescribeProducers: v0. For each partition this broker leads, the
// producers its log knows (hotlog.(*Log).Producers), by producer id;
// NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION otherwise. Read on
// the topic is needed (TOPIC_AUTHORIZATION_FAILED otherwise), as Kafka.
func (b *Broker) handleDescribeProducers(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authz.allowedTopic(rc, auth.OpRead, rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			p, code := b.parts.lookup(rt.Topic, idx)
			if !allowed {
				p, code = nil, kerr.TopicAuthorizationFailed.Code
			}
			if code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			producers := p.log.Producers()
			slices.SortFunc(producers, func(a, b2 hotlog.ProducerState) int { return cmpInt64(a.ProducerID, b2.ProducerID) })
			for _, ps := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = ps.ProducerID, int32(ps.ProducerEpoch), ps.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.LastTimestamp, ps.CoordinatorEpoch, ps.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
