package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group"
)

// TxnOffsetCommit: v0-4, served by the group's coordinator. The offsets are
// written to the group's __consumer_offsets partition as a transactional
// batch of the producer and become visible when the transaction's marker
// reaches that partition (broker/group: CompleteTxn). v3+ carry the
// member, checked like OffsetCommit's when set. Metadata longer than
// offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE for its
// partition. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v3.
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	in := group.TxnCommitInput{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Generation: -1, Offsets: map[group.TopicPartition]group.Offset{}}
	if req.Version >= 3 {
		in.Generation, in.Member = req.Generation, group.MemberRef{MemberID: req.MemberID}
		if req.InstanceID != nil {
			in.Member.InstanceID = *req.InstanceID
		}
	}
	tooLarge := map[group.TopicPartition]bool{}
	now := time.Now().UnixMilli()
	maxMeta := b.cfg.Group.WithDefaults().OffsetMetadataMaxBytes
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := group.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			if len(meta) > maxMeta {
				tooLarge[tp] = true
				continue
			}
			in.Offsets[tp] = group.Offset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta, CommitTimestamp: now}
		}
	}
	code := int16(0)
	if len(in.Offsets) > 0 {
		code = fencedForVersion(b.groups.TxnCommit(ctx, in), req.Version < 3)
	}
	for _, t := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			if tooLarge[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}] {
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
