package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group"
)

// Heartbeat: v0-4.

func (b *Broker) handleHeartbeat(_ context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = b.groups.Heartbeat(req.Group, req.Generation,
		group.MemberRef{MemberID: req.MemberID, InstanceID: derefStr(req.InstanceID)})
	return resp, nil
}
