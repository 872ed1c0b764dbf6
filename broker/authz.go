package broker

// Authorization: Kafka's ACL checks at the handlers.
//
// With Config.Authorizer off every request is allowed, as a Kafka broker
// without authorizer.class.name. With it on, a request is allowed only
// where an ACL (or super-user status, Config.SuperUsers) allows it: deny by
// default, any matching DENY wins (auth.Authorizer has the rules). The ACLs
// live in etcd (metadata/security.go); acl.Checker keeps the broker's
// snapshot of them current (its package comment has the snapshot and
// reload rules).
//
// Handlers call b.authz.allowed(rc, op, resourceType, name) (or its
// per-resource forms) with Kafka's per-API operations and answer Kafka's
// codes (TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
// the mapping per API is in each handler's doc comment. The Cluster
// resource is named "kafka-cluster".

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/auth/acl"
	"github.com/strata-log/strata/metadata"
)

// authorizer adapts acl.Checker to requests: the checks take the request
// context, whose principal and host they are for. Configured by New
// (Configure), started by Start; its zero value allows everything.
type authorizer struct{ acl.Checker }

// principalOf is the request's principal and client host; a request
// without a context (internal callers) is anonymous.
func principalOf(rc *requestContext) (principal, host string) {
	if rc == nil || rc.principal == "" {
		return anonymousPrincipal, hostOf(rc)
	}
	return rc.principal, rc.host
}

// principalName is the request's principal, for logs.
func principalName(rc *requestContext) string {
	p, _ := principalOf(rc)
	return p
}

func hostOf(rc *requestContext) string {
	if rc == nil {
		return ""
	}
	return rc.host
}

// requester is who rc's checks are for.
func requester(rc *requestContext) acl.Requester {
	principal, host := principalOf(rc)
	r := acl.Requester{Principal: principal, Host: host, APIKey: -1}
	if rc != nil {
		r.APIKey = rc.apiKey
	}
	return r
}

// allowed reports whether the request's principal may do op on the
// resource, logging a denial. Always true when the authorizer is off.
func (z *authorizer) allowed(rc *requestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	return z.Allowed(requester(rc), op, rt, name)
}

// allowedQuiet is allowed without the denial log.
func (z *authorizer) allowedQuiet(rc *requestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	return z.AllowedQuiet(requester(rc), op, rt, name)
}

// allowedCluster checks op on the Cluster resource.
func (z *authorizer) allowedCluster(rc *requestContext, op auth.Operation) bool {
	return z.allowed(rc, op, auth.ResourceCluster, auth.ClusterResourceName)
}

// allowedTopic checks op on a topic.
func (z *authorizer) allowedTopic(rc *requestContext, op auth.Operation, topic string) bool {
	return z.allowed(rc, op, auth.ResourceTopic, topic)
}

// allowedGroup checks op on a consumer group.
func (z *authorizer) allowedGroup(rc *requestContext, op auth.Operation, group string) bool {
	return z.allowed(rc, op, auth.ResourceGroup, group)
}

// allowedTxnID checks op on a transactional id.
func (z *authorizer) allowedTxnID(rc *requestContext, op auth.Operation, id string) bool {
	return z.allowed(rc, op, auth.ResourceTransactionalID, id)
}

// allowedIdempotentWrite is InitProducerId's check without a
// transactional id (acl.Checker.AllowedIdempotentWrite).
func (z *authorizer) allowedIdempotentWrite(rc *requestContext) bool {
	return z.AllowedIdempotentWrite(requester(rc))
}

// operations is the authorized_operations bit field of a resource for the
// request's principal.
func (z *authorizer) operations(rc *requestContext, rt auth.ResourceType, name string) int32 {
	return z.Operations(requester(rc), rt, name)
}

// topicAuthCode is TOPIC_AUTHORIZATION_FAILED unless rc may do op on the
// topic a Produce or Fetch names: by id from v13 on (an unknown id is left
// to the lookup, UNKNOWN_TOPIC_ID), else by name; 0 when allowed.
func (b *Broker) topicAuthCode(rc *requestContext, op auth.Operation, byID bool, name string, id metadata.TopicID) int16 {
	if byID {
		var ok bool
		if name, ok = b.parts.topicName(id); !ok {
			return 0
		}
	}
	if !b.authz.allowedTopic(rc, op, name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}
