package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
)

// ListGroups: v0-5. v4+ filter by state, v5+ by type: every group here is
// "classic" (KIP-848 consumer groups do not exist yet). Describe on the
// Cluster lists every group; otherwise only groups the principal may
// Describe are listed.

func (b *Broker) handleListGroups(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "classic") }) {
		return resp, nil
	}
	var states []group.State
	for _, s := range req.StatesFilter {
		for st := group.StateEmpty; st <= group.StateDead; st++ {
			if strings.EqualFold(st.String(), s) {
				states = append(states, st)
			}
		}
	}
	if len(req.StatesFilter) > 0 && len(states) == 0 {
		return resp, nil // only unknown states asked for
	}
	groups, code := b.groups.List(states)
	resp.ErrorCode = code
	all := b.authorizedCluster(rc, auth.OpDescribe)
	for _, l := range groups {
		if !all && !b.authorizedQuiet(rc, auth.OpDescribe, auth.ResourceGroup, l.Group) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, l.State.String(), "classic"
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
