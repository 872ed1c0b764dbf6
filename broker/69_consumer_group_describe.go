package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group/consumer"
)

// ConsumerGroupDescribe: v0-1. Describe on each group is needed
// (GROUP_AUTHORIZATION_FAILED); a group that is not a consumer-protocol
// group (classic or unknown) gets GROUP_ID_NOT_FOUND, as Kafka;
// NOT_COORDINATOR when this broker does not coordinate it. Topic names
// in assignments are those of the current topics (ids of deleted topics
// are described with an empty name). MemberType (v1) is 1: every member
// uses the consumer protocol (no classic members in consumer groups).

func (b *Broker) handleConsumerGroupDescribe(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	var names map[consumer.TopicID]consumer.TopicMetadata
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.AuthorizedOperations = id, authorizedOperationsUnknown
		if !b.authz.allowedGroup(rc, auth.OpDescribe, id) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d, code := b.groups.ConsumerDescribe(id)
		if g.ErrorCode = code; code != 0 {
			if code == kerr.GroupIDNotFound.Code {
				msg := "group " + id + " is not a consumer group"
				g.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if names == nil {
			names = b.consumerTopicMetadata()
		}
		describeConsumerGroup(&g, d, names)
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = b.authz.operations(rc, auth.ResourceGroup, id)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func describeConsumerGroup(g *kmsg.ConsumerGroupDescribeResponseGroup, d consumer.Description,
	topics map[consumer.TopicID]consumer.TopicMetadata) {
	g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
	for _, m := range d.Members {
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.RackID = m.MemberID, optStr(m.InstanceID), optStr(m.RackID)
		rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.MemberEpoch, m.ClientID, m.ClientHost
		rm.SubscribedTopics = append([]string{}, m.SubscribedTopicNames...)
		rm.SubscribedTopicRegex = optStr(m.SubscribedTopicRegex)
		rm.Assignment = describeAssignment(m.Assignment, topics)
		rm.TargetAssignment = describeAssignment(m.TargetAssignment, topics)
		rm.MemberType = 1
		g.Members = append(g.Members, rm)
	}
}

func describeAssignment(a consumer.Assignment, topics map[consumer.TopicID]consumer.TopicMetadata) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, tp := range a.List() {
		p := kmsg.NewAssignmentTopicPartition()
		p.TopicID, p.Topic, p.Partitions = tp.Topic, topics[tp.Topic].Name, tp.Partitions
		out.TopicPartitions = append(out.TopicPartitions, p)
	}
	return out
}
