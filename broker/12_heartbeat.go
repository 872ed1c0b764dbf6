package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// Heartbeat: v0-4. Read on the group is needed (GROUP_AUTHORIZATION_FAILED).

func (b *Broker) handleHeartbeat(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !b.authz.allowedGroup(rc, auth.OpRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	resp.ErrorCode = b.groups.Heartbeat(req.Group, req.Generation,
		group.MemberRef{MemberID: req.MemberID, InstanceID: derefStr(req.InstanceID)})
	return resp, nil
}
