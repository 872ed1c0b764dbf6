package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// ListGroups: v0-5. v4+ filter by state, v5+ by type: "classic" groups
// (the Machine) and "consumer" groups (KIP-848, protocol type "consumer";
// their states are Empty, Assigning, Reconciling, Stable). A classic
// entry that only holds a consumer group's offsets is listed once, as the
// consumer group. Describe on the Cluster lists every group; otherwise only
// groups the principal may Describe are listed.

func (b *Broker) handleListGroups(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	all := b.authz.allowedCluster(rc, auth.OpDescribe)
	visible := func(id string) bool { return all || b.authz.allowedQuiet(rc, auth.OpDescribe, auth.ResourceGroup, id) }
	consumers, code := b.groups.ListConsumer()
	resp.ErrorCode = code
	isConsumer := map[string]bool{}
	for _, l := range consumers {
		isConsumer[l.Group] = true
	}
	if wantsType(req.TypesFilter, "classic") {
		classic, code := b.groups.ListStateNames(req.StatesFilter)
		resp.ErrorCode = max(resp.ErrorCode, code)
		for _, l := range classic {
			if !isConsumer[l.Group] && visible(l.Group) {
				g := kmsg.NewListGroupsResponseGroup()
				g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, l.State.String(), "classic"
				resp.Groups = append(resp.Groups, g)
			}
		}
	}
	if !wantsType(req.TypesFilter, "consumer") {
		return resp, nil
	}
	for _, l := range consumers {
		if wantsType(req.StatesFilter, l.State) && visible(l.Group) {
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, "consumer", l.State, "consumer"
			resp.Groups = append(resp.Groups, g)
		}
	}
	return resp, nil
}

// wantsType: filter is empty or names v (case-insensitively).
func wantsType(filter []string, v string) bool {
	return len(filter) == 0 || slices.ContainsFunc(filter, func(t string) bool { return strings.EqualFold(t, v) })
}
