package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// DeleteGroups: v0-2. Only Empty groups (NON_EMPTY_GROUP otherwise);
// offsets and metadata get tombstones in __consumer_offsets. Delete on the
// group is needed (GROUP_AUTHORIZATION_FAILED).

func (b *Broker) handleDeleteGroups(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
		if b.authz.allowedGroup(rc, auth.OpDelete, name) {
			g.ErrorCode = b.groups.DeleteGroup(name)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
