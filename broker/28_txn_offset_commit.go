package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
)

// TxnOffsetCommit: v0-5, served by the group's coordinator. The offsets are
// written to the group's __consumer_offsets partition as a transactional
// batch of the producer and become visible when the transaction's marker
// reaches that partition (broker/group: CompleteTxn). v3+ carry the
// member, checked like OffsetCommit's when set. Metadata longer than
// offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE for its
// partition. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v3. From v5
// (KIP-890 part 2) the client sends no AddOffsetsToTxn: the group's
// offsets partition is first added to the transaction by its coordinator
// (txn.Router.AddImplicitly), and its answer is the code of every partition.
//
// Authorization: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Read on the group
// (GROUP_AUTHORIZATION_FAILED) for every partition; then Read on each topic
// (TOPIC_AUTHORIZATION_FAILED for its partitions, not committed).
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	if code := b.txnOffsetCommitAuthCode(rc, req); code != 0 {
		fillTxnOffsetCommitError(req, resp, code)
		return resp, nil
	}
	in := group.TxnCommitInput{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Generation: -1, Offsets: map[group.TopicPartition]group.Offset{}}
	if req.Version >= 3 {
		in.Generation, in.Member = req.Generation, group.MemberRef{MemberID: req.MemberID}
		if req.InstanceID != nil {
			in.Member.InstanceID = *req.InstanceID
		}
	}
	tooLarge := map[group.TopicPartition]bool{}
	deniedTopics := map[string]bool{}
	now := time.Now().UnixMilli()
	maxMeta := b.cfg.Group.WithDefaults().OffsetMetadataMaxBytes
	for _, t := range req.Topics {
		if !b.authz.allowedTopic(rc, auth.OpRead, t.Topic) {
			deniedTopics[t.Topic] = true
			continue
		}
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
	if len(in.Offsets) > 0 && req.Version >= 5 {
		code = b.txnRouter.AddImplicitly(ctx, txn.Ask{ID: req.TransactionalID, ProducerID: req.ProducerID,
			ProducerEpoch: req.ProducerEpoch, Topic: group.OffsetsTopic, Partition: b.groups.PartitionFor(req.Group)})
	}
	if len(in.Offsets) > 0 && code == 0 {
		code = txn.FencedForVersion(b.groups.TxnCommit(ctx, in), req.Version < 3)
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
			if deniedTopics[t.Topic] {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// txnOffsetCommitAuthCode is the request-wide authorization answer (0:
// allowed).
func (b *Broker) txnOffsetCommitAuthCode(rc *requestContext, req *kmsg.TxnOffsetCommitRequest) int16 {
	switch {
	case !b.authz.allowedTxnID(rc, auth.OpWrite, req.TransactionalID):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authz.allowedGroup(rc, auth.OpRead, req.Group):
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

// fillTxnOffsetCommitError answers code for every partition.
func fillTxnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse, code int16) {
	for _, t := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}
