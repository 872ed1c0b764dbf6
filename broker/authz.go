package broker

// Authorization (issue 9): Kafka's ACL checks.
//
// With Config.Authorizer off every request is allowed, as a Kafka broker
// without authorizer.class.name. With it on, a request is allowed only
// where an ACL (or super-user status, Config.SuperUsers) allows it: deny by
// default, any matching DENY wins (auth.Authorizer has the rules).
//
// The ACLs live in etcd (metadata/security.go). Each broker keeps an
// immutable snapshot (auth.Authorizer plus the ACL list it was built
// from), replaced whole when metadata.WatchSecurity fires: an ACL change
// reaches every broker within one etcd watch round trip, and a request
// sees one consistent snapshot for each check. Until the first load
// completes the snapshot is empty: only super users get through.
//
// Handlers call b.authorized(rc, op, resourceType, name) with Kafka's
// per-API operations and answer Kafka's codes (TOPIC_, GROUP_, CLUSTER_,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the mapping per API is in each
// handler's doc comment. The Cluster resource is named "kafka-cluster".
//
// State: authzState.current is an atomic pointer to an immutable
// snapshot, so readers take no lock. It is replaced by reloadAuthorizer
// (the security loop, and the ACL handlers right after their own writes)
// with compare-and-swap, never by an older etcd revision; the empty
// initial snapshot is installed on first use.

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// authzReloadTimeout bounds one reload of the ACLs from etcd.
const authzReloadTimeout = 30 * time.Second

// authzState is the broker's authorizer snapshot (see the file comment).
type authzState struct {
	current atomic.Pointer[authzSnapshot]
}

// authzSnapshot is one immutable view of the ACLs. revision is the etcd
// revision the list was read at (0 for the initial empty snapshot).
type authzSnapshot struct {
	z        *auth.Authorizer
	acls     []auth.ACL
	revision int64
}

// currentAuthz returns the current snapshot; before the first load an
// empty one (deny all but super users), installed on first use.
func (b *Broker) currentAuthz() *authzSnapshot {
	if s := b.authz.current.Load(); s != nil {
		return s
	}
	s := &authzSnapshot{z: auth.NewAuthorizer(nil, b.cfg.SuperUsers)}
	b.authz.current.CompareAndSwap(nil, s)
	return b.authz.current.Load()
}

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

// authorized reports whether the request's principal may do op on the
// resource. Always true when the authorizer is off.
func (b *Broker) authorized(rc *requestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	if !b.cfg.Authorizer {
		return true
	}
	principal, host := principalOf(rc)
	if b.currentAuthz().z.Authorized(principal, host, op, rt, name) {
		return true
	}
	b.log.Debug("request denied", "principal", principal, "host", host, "operation", op,
		"resource_type", rt, "resource", name, "api_key", apiKeyOf(rc))
	return false
}

func apiKeyOf(rc *requestContext) int16 {
	if rc == nil {
		return -1
	}
	return rc.apiKey
}

// authorizedCluster checks op on the Cluster resource.
func (b *Broker) authorizedCluster(rc *requestContext, op auth.Operation) bool {
	return b.authorized(rc, op, auth.ResourceCluster, auth.ClusterResourceName)
}

// authorizedTopic checks op on a topic.
func (b *Broker) authorizedTopic(rc *requestContext, op auth.Operation, topic string) bool {
	return b.authorized(rc, op, auth.ResourceTopic, topic)
}

// authorizedGroup checks op on a consumer group.
func (b *Broker) authorizedGroup(rc *requestContext, op auth.Operation, group string) bool {
	return b.authorized(rc, op, auth.ResourceGroup, group)
}

// authorizedTxnID checks op on a transactional id.
func (b *Broker) authorizedTxnID(rc *requestContext, op auth.Operation, id string) bool {
	return b.authorized(rc, op, auth.ResourceTransactionalID, id)
}

// authorizedIdempotentWrite is Kafka's check for InitProducerId without a
// transactional id (KIP-679): IdempotentWrite on the Cluster, or Write on
// any topic. "Any topic" is decided on the ACL list: some ALLOW of Write
// (or All) on a topic pattern for the principal (or User:*) and host (or
// *), and no DENY of Write (or All) on every topic (literal "*") for them.
// Kafka's authorizeByResourceType also weighs denies of narrower patterns
// against the allows; a principal whose every topic allow is shadowed by
// such denies gets an id here but cannot write anywhere with it.
func (b *Broker) authorizedIdempotentWrite(rc *requestContext) bool {
	if b.authorizedCluster(rc, auth.OpIdempotentWrite) {
		return true
	}
	principal, host := principalOf(rc)
	allowed := false
	for _, a := range b.currentAuthz().acls {
		if a.ResourceType != auth.ResourceTopic || (a.Operation != auth.OpWrite && a.Operation != auth.OpAll) ||
			!aclAppliesTo(a, principal, host) {
			continue
		}
		if a.Permission == auth.PermissionDeny && a.PatternType == auth.PatternLiteral && a.ResourceName == "*" {
			return false
		}
		allowed = allowed || a.Permission == auth.PermissionAllow
	}
	return allowed
}

// aclAppliesTo: the ACL names the principal (or every principal of its
// type, "User:*") and the host (or every host).
func aclAppliesTo(a auth.ACL, principal, host string) bool {
	wildcard := ""
	if kind, _, ok := strings.Cut(principal, ":"); ok {
		wildcard = kind + ":*"
	}
	return (a.Principal == principal || a.Principal == wildcard) && (a.Host == host || a.Host == auth.Wildcard)
}

// Operations Kafka reports in authorized_operations bit fields, per
// resource type (bit i set: operation code i allowed).
var (
	topicOperations = []auth.Operation{auth.OpRead, auth.OpWrite, auth.OpCreate, auth.OpDescribe, auth.OpDelete,
		auth.OpAlter, auth.OpDescribeConfigs, auth.OpAlterConfigs}
	clusterOperations = []auth.Operation{auth.OpCreate, auth.OpClusterAction, auth.OpDescribeConfigs,
		auth.OpAlterConfigs, auth.OpIdempotentWrite, auth.OpAlter, auth.OpDescribe}
	groupOperations = []auth.Operation{auth.OpRead, auth.OpDescribe, auth.OpDelete}
)

// authorizedOperations is the authorized_operations bit field of a
// resource for the request's principal (Metadata, DescribeCluster,
// DescribeGroups when the client asks): every supported operation when
// the authorizer is off, as Kafka.
func (b *Broker) authorizedOperations(rc *requestContext, rt auth.ResourceType, name string) int32 {
	var ops []auth.Operation
	switch rt {
	case auth.ResourceTopic:
		ops = topicOperations
	case auth.ResourceCluster:
		ops = clusterOperations
	case auth.ResourceGroup:
		ops = groupOperations
	}
	var bits int32
	for _, op := range ops {
		if !b.cfg.Authorizer || b.authorizedQuiet(rc, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// authorizedQuiet is authorized without the denial log (for bit fields,
// where a denial is an answer, not an event).
func (b *Broker) authorizedQuiet(rc *requestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	if !b.cfg.Authorizer {
		return true
	}
	principal, host := principalOf(rc)
	return b.currentAuthz().z.Authorized(principal, host, op, rt, name)
}

// startAuthorizer loads the ACLs once and starts the loop that reloads
// them on every change. The watch starts before the load, so a change
// between the two is not missed. With the authorizer off nothing runs.
func (b *Broker) startAuthorizer(ctx context.Context) error {
	if !b.cfg.Authorizer {
		return nil
	}
	changes := b.store.WatchSecurity(b.lifetime)
	if err := b.reloadAuthorizer(ctx); err != nil {
		return err
	}
	b.loops.Add(1)
	go b.authzLoop(changes)
	return nil
}

// authzLoop reloads the snapshot after each change until the broker
// stops. A failed reload keeps the old snapshot and is retried after a
// second; a watch channel that closes while the broker lives is opened
// again (followed by a reload: changes may have been missed).
func (b *Broker) authzLoop(changes <-chan struct{}) {
	defer b.loops.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-b.lifetime.Done():
			return
		case _, ok := <-changes:
			if !ok {
				select {
				case <-b.lifetime.Done():
					return
				case <-time.After(time.Second):
				}
				changes = b.store.WatchSecurity(b.lifetime)
			}
		case <-retry.C:
		}
		ctx, cancel := context.WithTimeout(b.lifetime, authzReloadTimeout)
		err := b.reloadAuthorizer(ctx)
		cancel()
		if err != nil && b.lifetime.Err() == nil {
			b.log.Warn("reloading ACLs; the previous ones stay in force", "err", err)
			retry.Reset(time.Second)
		}
	}
}

// reloadAuthorizer reads every ACL and installs a new snapshot, unless a
// newer one is already in place.
func (b *Broker) reloadAuthorizer(ctx context.Context) error {
	acls, rev, err := b.store.ACLs(ctx)
	if err != nil {
		return err
	}
	next := &authzSnapshot{z: auth.NewAuthorizer(acls, b.cfg.SuperUsers), acls: slices.Clone(acls), revision: rev}
	for {
		cur := b.authz.current.Load()
		if cur != nil && cur.revision > rev {
			return nil
		}
		if b.authz.current.CompareAndSwap(cur, next) {
			b.log.Debug("ACLs loaded", "acls", len(acls), "revision", rev)
			return nil
		}
	}
}

// topicAuthCode is TOPIC_AUTHORIZATION_FAILED unless rc may do op on the
// topic a Produce or Fetch names: by id from v13 on (an unknown id is left
// to the lookup, UNKNOWN_TOPIC_ID), else by name; 0 when allowed.
func (b *Broker) topicAuthCode(rc *requestContext, op auth.Operation, byID bool, name string, id metadata.TopicID) int16 {
	if byID {
		var ok bool
		if name, ok = b.topicName(id); !ok {
			return 0
		}
	}
	if !b.authorizedTopic(rc, op, name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}
