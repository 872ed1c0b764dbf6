package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/quota"
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
	if !quotaAdminAllowed(&b.authz, rc, false) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "not authorized to describe client quotas")
	}
	filter, err := quota.ParseFilter(req.Components, req.Strict)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, err.Error())
	}
	all, err := b.store.Quotas(ctx)
	if err != nil {
		return fail(kerr.UnknownServerError.Code, "reading quotas: "+err.Error())
	}
	for e, values := range all {
		if filter.Matches(e) {
			resp.Entries = append(resp.Entries, quota.DescribedEntry(e, values))
		}
	}
	sort.Slice(resp.Entries, func(i, j int) bool {
		return quota.EntityString(resp.Entries[i].Entity) < quota.EntityString(resp.Entries[j].Entity)
	})
	return resp, nil
}

// quotaAdminAllowed: DescribeClientQuotas needs DescribeConfigs on the
// cluster, AlterClientQuotas AlterConfigs, as in Kafka.
func quotaAdminAllowed(z *authorizer, rc *requestContext, alter bool) bool {
	if alter {
		return z.allowedCluster(rc, auth.OpAlterConfigs)
	}
	return z.allowedCluster(rc, auth.OpDescribeConfigs)
}
