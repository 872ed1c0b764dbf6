package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2. Only Empty groups (NON_EMPTY_GROUP otherwise);
// offsets and metadata get tombstones in __consumer_offsets.

func (b *Broker) handleDeleteGroups(_ context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = name, b.groups.DeleteGroup(name)
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
