package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// handleDescribeClientQuotas lists the stored quota entities matching the
// request's filter, as Kafka: per component an exact name, the default,
// or any; strict excludes entities with components of other types.
func (b *Broker) handleDescribeClientQuotas(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp, nil
	}
	if !b.quotaAdminAllowed(rc, false) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "not authorized to describe client quotas")
	}
	filter, err := parseQuotaFilter(req.Components, req.Strict)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, err.Error())
	}
	all, err := b.store.Quotas(ctx)
	if err != nil {
		return fail(kerr.UnknownServerError.Code, "reading quotas: "+err.Error())
	}
	for e, values := range all {
		if filter.matches(e) {
			resp.Entries = append(resp.Entries, describedQuotaEntry(e, values))
		}
	}
	sort.Slice(resp.Entries, func(i, j int) bool {
		return quotaEntityString(resp.Entries[i].Entity) < quotaEntityString(resp.Entries[j].Entity)
	})
	return resp, nil
}

// quotaComponentFilter is one component of a DescribeClientQuotas filter.
type quotaComponentFilter struct {
	matchType kmsg.QuotasMatchType // 0 exact, 1 default, 2 any
	name      string
}

// quotaFilter is a parsed DescribeClientQuotas filter, by entity type.
type quotaFilter struct {
	byType map[string]quotaComponentFilter
	strict bool
}

func parseQuotaFilter(components []kmsg.DescribeClientQuotasRequestComponent, strict bool) (quotaFilter, error) {
	f := quotaFilter{byType: map[string]quotaComponentFilter{}, strict: strict}
	for _, c := range components {
		if c.EntityType != quotaEntityUser && c.EntityType != quotaEntityClientID {
			return f, fmt.Errorf("entity type %q is not supported", c.EntityType)
		}
		if _, dup := f.byType[c.EntityType]; dup {
			return f, fmt.Errorf("entity type %q appears more than once", c.EntityType)
		}
		cf := quotaComponentFilter{matchType: c.MatchType}
		switch {
		case c.MatchType == 0 && c.Match == nil:
			return f, fmt.Errorf("exact match on %s without a name", c.EntityType)
		case c.MatchType == 0:
			cf.name = *c.Match
		case c.MatchType != 1 && c.MatchType != 2:
			return f, fmt.Errorf("unknown match type %d", c.MatchType)
		case c.Match != nil:
			return f, fmt.Errorf("match type %d on %s takes no name", c.MatchType, c.EntityType)
		}
		f.byType[c.EntityType] = cf
	}
	return f, nil
}

// matches applies the filter to one stored entity.
func (f quotaFilter) matches(e quotaEntity) bool {
	parts := map[string]struct {
		present, isDefault bool
		name               string
	}{
		quotaEntityUser:     {e.User != "" || e.DefaultUser, e.DefaultUser, e.User},
		quotaEntityClientID: {e.ClientID != "" || e.DefaultClientID, e.DefaultClientID, e.ClientID},
	}
	for typ, p := range parts {
		cf, filtered := f.byType[typ]
		if !filtered {
			if f.strict && p.present {
				return false
			}
			continue
		}
		switch {
		case !p.present:
			return false
		case cf.matchType == 0 && (p.isDefault || p.name != cf.name):
			return false
		case cf.matchType == 1 && !p.isDefault:
			return false
		}
	}
	return true
}

func describedQuotaEntry(e quotaEntity, values map[string]float64) kmsg.DescribeClientQuotasResponseEntry {
	entry := kmsg.NewDescribeClientQuotasResponseEntry()
	add := func(typ, name string, isDefault bool) {
		c := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		c.Type = typ
		if !isDefault {
			c.Name = kmsg.StringPtr(name)
		}
		entry.Entity = append(entry.Entity, c)
	}
	if e.User != "" || e.DefaultUser {
		add(quotaEntityUser, e.User, e.DefaultUser)
	}
	if e.ClientID != "" || e.DefaultClientID {
		add(quotaEntityClientID, e.ClientID, e.DefaultClientID)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := kmsg.NewDescribeClientQuotasResponseEntryValue()
		v.Key, v.Value = k, values[k]
		entry.Values = append(entry.Values, v)
	}
	return entry
}

// quotaEntityString orders described entities (user first, defaults as
// "<default>").
func quotaEntityString(parts []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	s := ""
	for _, p := range parts {
		name := "<default>"
		if p.Name != nil {
			name = "=" + *p.Name
		}
		s += p.Type + name + ","
	}
	return s
}

// quotaAdminAllowed: DescribeClientQuotas needs DescribeConfigs on the
// cluster, AlterClientQuotas AlterConfigs, as in Kafka.
func (b *Broker) quotaAdminAllowed(rc *requestContext, alter bool) bool {
	if alter {
		return b.authorizedCluster(rc, auth.OpAlterConfigs)
	}
	return b.authorizedCluster(rc, auth.OpDescribeConfigs)
}
