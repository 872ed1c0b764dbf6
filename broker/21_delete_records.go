package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// DeleteRecords: v0-2.
//
// Delete on the topic is needed (TOPIC_AUTHORIZATION_FAILED otherwise).
//
// Behaviour per partition:
//   - offset -1 means the HW;
//   - any other offset below 0 or above the HW is OFFSET_OUT_OF_RANGE;
//   - a topic whose cleanup.policy lacks "delete" is POLICY_VIOLATION, as
//     in Kafka;
//   - otherwise the log start moves up to offset (never down) in both tiers
//     (tier.Service.DeleteRecords: etcd's tiered log start first, then the hot
//     log), tiered segments wholly below it are removed (manifest entry,
//     then object), and the answer is the new low watermark. With replicas Kafka waits, up to
//     the request timeout, until every replica's log start got there; a
//     single node is done once its own log moved.
//   - a diskless partition's log start is raised in its head in etcd
//     (diskless.RaiseStart), by any broker.

// deleteRecordsToHighWatermark is the offset meaning "up to the HW".
const deleteRecordsToHighWatermark = -1

func (b *Broker) handleDeleteRecords(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authz.allowedTopic(rc, auth.OpDelete, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark, sp.ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
			if allowed {
				sp.LowWatermark, sp.ErrorCode = b.deleteRecords(ctx, rt.Topic, rp.Partition, rp.Offset)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// deleteRecords moves one partition's log start; it returns the new low
// watermark (-1 on error) and a Kafka error code.
func (b *Broker) deleteRecords(ctx context.Context, topic string, index int32, offset int64) (int64, int16) {
	if tp, cfg, code, ok := b.disklessPart(false, topic, [16]byte{}, index); ok {
		return b.deleteDisklessRecords(ctx, tp, cfg, code, offset)
	}
	p, code := b.parts.lookup(topic, index)
	if code != 0 {
		return -1, code
	}
	if !p.config().HasDelete() {
		return -1, kerr.PolicyViolation.Code
	}
	hw := p.highWatermark()
	if offset == deleteRecordsToHighWatermark {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange.Code
	}
	if err := b.tiering.DeleteRecords(ctx, tierPartition{p, b}, offset); err != nil {
		code := dataPathErrorCode(err)
		b.log.Warn("delete records failed", "topic", topic, "partition", index, "offset", offset,
			"err", fmt.Errorf("broker: delete records: %w", err))
		return -1, code
	}
	return p.logStartOffset(), 0
}
