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
// Kafka 4 does (group.ClassicDescription).

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
		d, code := b.groups.DescribeAsClassic(name)
		g.ErrorCode, g.State = code, d.State
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
