package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// DescribeAcls: v0-3. Needs Describe on the Cluster (top-level
// CLUSTER_AUTHORIZATION_FAILED otherwise). The filter follows Kafka's
// AclBindingFilter (auth.ACLFilter: ANY values and a null name, principal
// or host match everything; pattern MATCH selects every pattern that
// applies to the name); an invalid one is INVALID_REQUEST. The ACLs are
// read from etcd, so the answer is never older than the last write, and
// are grouped by resource pattern in a stable order. v0 filters are
// literal.

func (b *Broker) handleDescribeACLs(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !b.authz.allowedCluster(rc, auth.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	f := auth.ACLFilter{
		ResourceType: auth.ResourceType(req.ResourceType), ResourceName: derefStr(req.ResourceName),
		PatternType: auth.PatternType(req.ResourcePatternType), Principal: derefStr(req.Principal),
		Host: derefStr(req.Host), Operation: auth.Operation(req.Operation), Permission: auth.Permission(req.PermissionType),
	}
	if req.Version == 0 {
		f.PatternType = auth.PatternLiteral
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp, nil
	}
	acls, _, err := b.store.ACLs(ctx)
	if err != nil {
		code, msg := securityStoreErrorCode(err)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp, nil
	}
	var matched []auth.ACL
	for _, a := range acls {
		if f.Matches(a) {
			matched = append(matched, a)
		}
	}
	resp.Resources = describedACLResources(matched)
	return resp, nil
}

// describedACLResources groups ACLs by resource pattern, sorted by type,
// name and pattern type (and the ACLs of one resource by principal, host,
// operation and permission), so equal sets answer equally.
func describedACLResources(acls []auth.ACL) []kmsg.DescribeACLsResponseResource {
	slices.SortFunc(acls, compareACLs)
	var out []kmsg.DescribeACLsResponseResource
	for i, a := range acls {
		if i == 0 || !sameResourcePattern(acls[i-1], a) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			out = append(out, r)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		last := &out[len(out)-1]
		last.ACLs = append(last.ACLs, e)
	}
	return out
}

func sameResourcePattern(x, y auth.ACL) bool {
	return x.ResourceType == y.ResourceType && x.ResourceName == y.ResourceName && x.PatternType == y.PatternType
}

func compareACLs(x, y auth.ACL) int {
	switch {
	case x.ResourceType != y.ResourceType:
		return int(x.ResourceType) - int(y.ResourceType)
	case x.ResourceName != y.ResourceName:
		return compareStrings(x.ResourceName, y.ResourceName)
	case x.PatternType != y.PatternType:
		return int(x.PatternType) - int(y.PatternType)
	case x.Principal != y.Principal:
		return compareStrings(x.Principal, y.Principal)
	case x.Host != y.Host:
		return compareStrings(x.Host, y.Host)
	case x.Operation != y.Operation:
		return int(x.Operation) - int(y.Operation)
	}
	return int(x.Permission) - int(y.Permission)
}
