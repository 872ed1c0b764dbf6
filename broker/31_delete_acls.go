package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// DeleteAcls: v0-3. Needs Alter on the Cluster (every filter result
// CLUSTER_AUTHORIZATION_FAILED otherwise). Each filter (auth.ACLFilter,
// as DescribeAcls) deletes the ACLs it matches, in request order, and
// lists them; an ACL an earlier filter of the request deleted is not
// listed again. An invalid filter is INVALID_REQUEST. This broker reloads
// its snapshot before answering. v0 filters are literal.

func (b *Broker) handleDeleteACLs(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	if !b.authz.allowedCluster(rc, auth.OpAlter) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	deleted := 0
	for i, rf := range req.Filters {
		res := &resp.Results[i]
		f := aclFilterFromDelete(req.Version, rf)
		if err := f.Validate(); err != nil {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		acls, err := b.store.DeleteACLs(ctx, f)
		if err != nil {
			code, msg := securityStoreErrorCode(err)
			res.ErrorCode, res.ErrorMessage = code, kmsg.StringPtr(msg)
			continue
		}
		deleted += len(acls)
		for _, a := range acls {
			res.MatchingACLs = append(res.MatchingACLs, deletedACL(a))
		}
	}
	if deleted > 0 {
		b.log.Info("ACLs deleted", "principal", principalName(rc), "acls", deleted)
		b.authz.ReloadAfterChange(ctx)
	}
	return resp, nil
}

func aclFilterFromDelete(version int16, rf kmsg.DeleteACLsRequestFilter) auth.ACLFilter {
	f := auth.ACLFilter{
		ResourceType: auth.ResourceType(rf.ResourceType), ResourceName: derefStr(rf.ResourceName),
		PatternType: auth.PatternType(rf.ResourcePatternType), Principal: derefStr(rf.Principal),
		Host: derefStr(rf.Host), Operation: auth.Operation(rf.Operation), Permission: auth.Permission(rf.PermissionType),
	}
	if version == 0 {
		f.PatternType = auth.PatternLiteral
	}
	return f
}

func deletedACL(a auth.ACL) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
	m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
	m.Principal, m.Host = a.Principal, a.Host
	m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
	return m
}
