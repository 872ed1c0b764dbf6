package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// CreateAcls: v0-3. Needs Alter on the Cluster (every result
// CLUSTER_AUTHORIZATION_FAILED otherwise). Each creation is validated as
// Kafka does (auth.ACL.Validate: concrete types, "Type:name" principal,
// the cluster named kafka-cluster; INVALID_REQUEST otherwise); the valid
// ones are written to etcd together (an ACL already stored is not
// duplicated) and this broker reloads its snapshot before answering, so
// the creator's next request here already sees them. Other brokers see
// them one etcd watch round trip later. v0 creations are literal.

func (b *Broker) handleCreateACLs(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	if !b.authz.allowedCluster(rc, auth.OpAlter) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	var valid []auth.ACL
	var validAt []int
	for i, c := range req.Creations {
		a := aclFromCreation(req.Version, c)
		if err := a.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid, validAt = append(valid, a), append(validAt, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	if err := b.store.CreateACLs(ctx, valid); err != nil {
		code, msg := securityStoreErrorCode(err)
		for _, i := range validAt {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	b.log.Info("ACLs created", "principal", principalName(rc), "acls", len(valid))
	b.authz.ReloadAfterChange(ctx)
	return resp, nil
}

// aclFromCreation converts a request's ACL (the enums share Kafka's codes).
func aclFromCreation(version int16, c kmsg.CreateACLsRequestCreation) auth.ACL {
	a := auth.ACL{
		ResourceType: auth.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
		PatternType: auth.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
		Operation: auth.Operation(c.Operation), Permission: auth.Permission(c.PermissionType),
	}
	if version == 0 {
		a.PatternType = auth.PatternLiteral
	}
	return a
}

// securityStoreErrorCode maps an etcd failure of an ACL or credential
// write: a timeout is retriable, anything else UNKNOWN_SERVER_ERROR.
func securityStoreErrorCode(err error) (int16, string) {
	code, msg := errorCode(err)
	if code != kerr.RequestTimedOut.Code {
		code = kerr.UnknownServerError.Code
	}
	return code, msg
}
