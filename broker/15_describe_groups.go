package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-5. An unknown group is described as Dead with no
// error, as Kafka does before v6.

func (b *Broker) handleDescribeGroups(_ context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		d, code := b.groups.Describe(name)
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ErrorCode, g.State = name, code, d.State.String()
		g.ProtocolType, g.Protocol = d.ProtocolType, d.Protocol
		g.AuthorizedOperations = -2147483648 // not requested / not computed
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
