package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// LeaveGroup: v0-5. v0-2 name one member and answer with the top-level
// code; v3+ batch members (by member id and/or group.instance.id) with a
// code each. Read on the group is needed (GROUP_AUTHORIZATION_FAILED).

func (b *Broker) handleLeaveGroup(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !b.authz.allowedGroup(rc, auth.OpRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	var refs []group.MemberRef
	if req.Version < 3 {
		refs = []group.MemberRef{{MemberID: req.MemberID}}
	}
	for _, m := range req.Members {
		refs = append(refs, group.MemberRef{MemberID: m.MemberID, InstanceID: derefStr(m.InstanceID)})
	}
	top, codes := b.groups.Leave(req.Group, refs)
	resp.ErrorCode = top
	if top != 0 {
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = codes[0]
		return resp, nil
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
