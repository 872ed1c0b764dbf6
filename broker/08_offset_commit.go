package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// OffsetCommit: v0-9. Generation -1 with an empty member id is a simple
// (standalone) commit, accepted while the group has no members (v0 is
// always one). Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION
// and metadata longer than offset.metadata.max.bytes
// OFFSET_METADATA_TOO_LARGE; the rest are committed together and answered
// once the commit is durable in __consumer_offsets. Read on the group is
// needed (every partition GROUP_AUTHORIZATION_FAILED otherwise), and Read
// on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).

func (b *Broker) handleOffsetCommit(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	in := group.CommitInput{
		Group: req.Group, Generation: req.Generation,
		Member:  group.MemberRef{MemberID: req.MemberID, InstanceID: derefStr(req.InstanceID)},
		Offsets: map[group.TopicPartition]group.Offset{},
	}
	if req.Version == 0 {
		in.Generation = -1
	}
	now := time.Now().UnixMilli()
	groupAllowed := b.authz.allowedGroup(rc, auth.OpRead, req.Group)
	for _, rt := range req.Topics {
		denied := int16(0)
		switch {
		case !groupAllowed:
			denied = kerr.GroupAuthorizationFailed.Code
		case !b.authz.allowedTopic(rc, auth.OpRead, rt.Topic):
			denied = kerr.TopicAuthorizationFailed.Code
		}
		resp.Topics = append(resp.Topics, b.offsetCommitTopic(req.Version, rt, in.Offsets, now, denied))
	}
	if len(in.Offsets) == 0 {
		return resp, nil
	}
	code := b.groups.Commit(in)
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			if sp := &resp.Topics[ti].Partitions[pi]; sp.ErrorCode == 0 {
				sp.ErrorCode = code
			}
		}
	}
	return resp, nil
}

// offsetCommitTopic checks a topic's partitions, adding the committable
// ones to offsets; the others get their error code (denied, the topic's
// authorization answer, first).
func (b *Broker) offsetCommitTopic(version int16, rt kmsg.OffsetCommitRequestTopic,
	offsets map[group.TopicPartition]group.Offset, now int64, denied int16,
) kmsg.OffsetCommitResponseTopic {
	st := kmsg.NewOffsetCommitResponseTopic()
	st.Topic = rt.Topic
	for _, rp := range rt.Partitions {
		sp := kmsg.NewOffsetCommitResponseTopicPartition()
		sp.Partition = rp.Partition
		sp.ErrorCode = denied
		if denied == 0 {
			sp.ErrorCode = b.offsetCommitCheck(rt.Topic, rp)
		}
		if sp.ErrorCode == 0 {
			offsets[group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = commitOffset(version, rp, now)
		}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}

// offsetCommitCheck is a partition's own error code (0 if committable).
func (b *Broker) offsetCommitCheck(topic string, rp kmsg.OffsetCommitRequestTopicPartition) int16 {
	t, ok := b.parts.topic(topic)
	switch {
	case !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.states):
		return kerr.UnknownTopicOrPartition.Code
	case rp.Metadata != nil && len(*rp.Metadata) > b.cfg.Group.WithDefaults().OffsetMetadataMaxBytes:
		return kerr.OffsetMetadataTooLarge.Code
	}
	return 0
}

func commitOffset(version int16, rp kmsg.OffsetCommitRequestTopicPartition, now int64) group.Offset {
	o := group.Offset{Offset: rp.Offset, LeaderEpoch: -1, Metadata: derefStr(rp.Metadata), CommitTimestamp: now}
	if version >= 6 {
		o.LeaderEpoch = rp.LeaderEpoch
	}
	return o
}
