package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// SyncGroup: v0-5. The leader's sync carries the assignment; every member's
// answer waits until it is persisted in __consumer_offsets. Read on the
// group is needed (GROUP_AUTHORIZATION_FAILED).

func (b *Broker) handleSyncGroup(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if !b.authz.allowedGroup(rc, auth.OpRead, req.Group) {
		resp.ErrorCode, resp.MemberAssignment = kerr.GroupAuthorizationFailed.Code, []byte{}
		return resp, nil
	}
	in := group.SyncInput{
		Group: req.Group, MemberID: req.MemberID, InstanceID: derefStr(req.InstanceID), Generation: req.Generation,
		ProtocolType: req.ProtocolType, Protocol: req.Protocol,
	}
	for _, a := range req.GroupAssignment {
		in.Assignments = append(in.Assignments, group.Assignment{MemberID: a.MemberID, Assignment: a.MemberAssignment})
	}
	res := b.groups.Sync(ctx, in)
	resp.ErrorCode, resp.MemberAssignment = res.Code, res.Assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	if res.Code == 0 && req.Version >= 5 {
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	}
	return resp, nil
}
