package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// JoinGroup: v0-9. v4+ new dynamic members get MEMBER_ID_REQUIRED first
// (KIP-394); v5+ static membership; v7+ protocol type in the answer; v9
// skip_assignment for a static leader rejoining a Stable group (KIP-814).
// The answer waits for the rebalance (broker/group). Read on the group is
// needed (GROUP_AUTHORIZATION_FAILED, generation -1).

func (b *Broker) handleJoinGroup(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	if !b.authz.allowedGroup(rc, auth.OpRead, req.Group) {
		resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
		return resp, nil
	}
	in := group.JoinInput{
		Group: req.Group, MemberID: req.MemberID, InstanceID: derefStr(req.InstanceID),
		ClientID: rc.clientID, ClientHost: clientHost(rc), ProtocolType: req.ProtocolType,
		SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		RequireKnownMemberID: req.Version >= 4,
	}
	if req.Version == 0 {
		in.RebalanceTimeoutMs = req.SessionTimeoutMillis
	}
	if len(req.Protocols) > 0 {
		in.Protocols = make([]group.Protocol, 0, len(req.Protocols))
	}
	for _, p := range req.Protocols {
		in.Protocols = append(in.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	res := b.groups.Join(ctx, in)
	resp.ErrorCode, resp.Generation, resp.MemberID, resp.LeaderID = res.Code, res.Generation, res.MemberID, res.Leader
	resp.SkipAssignment = res.SkipAssignment
	if res.Code == 0 || req.Version < 7 {
		resp.Protocol = kmsg.StringPtr(res.Protocol)
	}
	if res.Code == 0 && req.Version >= 7 {
		resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, optStr(m.InstanceID), m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
