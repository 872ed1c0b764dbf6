package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// DescribeUserScramCredentials: v0. Needs Describe on the Cluster
// (top-level CLUSTER_AUTHORIZATION_FAILED otherwise). No users (null or
// empty) describes every user with a credential; a named user without one
// is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE, as Kafka.
// Only mechanisms and iteration counts are answered: salts and keys never
// leave etcd.

// scramMechanismCodes are the wire codes of the SCRAM mechanisms (KIP-554).
var scramMechanismCodes = map[string]int8{auth.MechScramSHA256: 1, auth.MechScramSHA512: 2}

// scramMechanismName is the mechanism of a wire code ("" if unknown).
func scramMechanismName(code int8) string {
	for name, c := range scramMechanismCodes {
		if c == code {
			return name
		}
	}
	return ""
}

func (b *Broker) handleDescribeUserSCRAMCredentials(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !b.authz.allowedCluster(rc, auth.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	users, err := b.store.ScramUsers(ctx)
	if err != nil {
		code, msg := securityStoreErrorCode(err)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp, nil
	}
	if len(req.Users) == 0 {
		names := make([]string, 0, len(users))
		for name := range users {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			resp.Results = append(resp.Results, describedScramUser(name, users[name]))
		}
		return resp, nil
	}
	seen := map[string]int{}
	for _, u := range req.Users {
		seen[u.Name]++
	}
	for _, u := range req.Users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u.Name
		creds, ok := users[u.Name]
		switch {
		case seen[u.Name] > 1:
			r.ErrorCode, r.ErrorMessage = kerr.DuplicateResource.Code, kmsg.StringPtr("user named twice in one request")
		case !ok || len(creds) == 0:
			r.ErrorCode, r.ErrorMessage = kerr.ResourceNotFound.Code, kmsg.StringPtr("the user has no SCRAM credential")
		default:
			r = describedScramUser(u.Name, creds)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func describedScramUser(name string, creds []auth.ScramCredential) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	r.User = name
	for _, c := range creds {
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = scramMechanismCodes[c.Mechanism], int32(c.Iterations)
		r.CredentialInfos = append(r.CredentialInfos, info)
	}
	slices.SortFunc(r.CredentialInfos, func(x, y kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo) int {
		return int(x.Mechanism) - int(y.Mechanism)
	})
	return r
}
