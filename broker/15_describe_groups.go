package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// DescribeGroups: v0-5. An unknown group is described as Dead with no
// error, as Kafka does before v6. Describe on a group is needed
// (GROUP_AUTHORIZATION_FAILED); authorized_operations (v3+) are computed
// when asked for. A consumer-protocol group (KIP-848) is described as
// Kafka 4 does: protocol type "consumer", the protocol is its assignor,
// its state (Empty, Assigning, Reconciling, Stable), and each member's
// subscription and current assignment in the classic consumer protocol's
// encoding (ConsumerMemberMetadata v0, ConsumerMemberAssignment v0).

func (b *Broker) handleDescribeGroups(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.AuthorizedOperations = name, authorizedOperationsUnknown
		if !b.authz.allowedGroup(rc, auth.OpDescribe, name) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if b.groups.IsConsumerGroup(name) {
			b.describeConsumerAsClassic(&g, name)
			if req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = b.authz.operations(rc, auth.ResourceGroup, name)
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d, code := b.groups.Describe(name)
		g.ErrorCode, g.State = code, d.State.String()
		g.ProtocolType, g.Protocol = d.ProtocolType, d.Protocol
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = b.authz.operations(rc, auth.ResourceGroup, name)
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, optStr(m.InstanceID), m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = nonNilBytes(m.Metadata), nonNilBytes(m.Assignment)
			g.Members = append(g.Members, rm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (b *Broker) describeConsumerAsClassic(g *kmsg.DescribeGroupsResponseGroup, name string) {
	d, code := b.groups.ConsumerDescribe(name)
	if g.ErrorCode = code; code != 0 {
		if code == kerr.GroupIDNotFound.Code { // deleted meanwhile
			g.ErrorCode, g.State = 0, "Dead"
		}
		return
	}
	topics := b.consumerTopicMetadata()
	g.State, g.ProtocolType, g.Protocol = d.State, "consumer", d.Assignor
	for _, m := range d.Members {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, optStr(m.InstanceID), m.ClientID, m.ClientHost
		md := kmsg.ConsumerMemberMetadata{Topics: append([]string{}, m.SubscribedTopicNames...)}
		rm.ProtocolMetadata = md.AppendTo(nil)
		var a kmsg.ConsumerMemberAssignment
		for _, tp := range m.Assignment.List() {
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: topics[tp.Topic].Name, Partitions: tp.Partitions})
		}
		rm.MemberAssignment = a.AppendTo(nil)
		g.Members = append(g.Members, rm)
	}
}
