package broker

// Authorization: Kafka's ACL checks.
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
// Handlers call b.authz.allowed(rc, op, resourceType, name) (or its
// per-resource forms) with Kafka's per-API operations and answer Kafka's
// codes (TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
// the mapping per API is in each handler's doc comment. The Cluster
// resource is named "kafka-cluster".
//
// State: authorizer.current is an atomic pointer to an immutable
// snapshot, so readers take no lock. It is replaced by authorizer.reload
// (the security loop, and the ACL handlers right after their own writes)
// with compare-and-swap, never by an older etcd revision; the empty
// initial snapshot is installed on first use. The other fields are set by
// configure in New and read-only afterwards.

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// authzReloadTimeout bounds one reload of the ACLs from etcd.
const authzReloadTimeout = 30 * time.Second

// aclStore is the slice of the metadata store the authorizer reads
// (*metadata.Store implements it).
type aclStore interface {
	// ACLs returns every ACL and the etcd revision it was read at.
	ACLs(ctx context.Context) ([]auth.ACL, int64, error)
	// WatchSecurity signals changes under acls/ (and the other security
	// prefixes), coalesced; the channel closes when ctx ends.
	WatchSecurity(ctx context.Context) <-chan struct{}
}

// authorizer is the broker's ACL checker (see the file comment). Its zero
// value allows everything (authorization off).
type authorizer struct {
	on         bool // Config.Authorizer
	superUsers []string
	store      aclStore
	log        *slog.Logger

	current atomic.Pointer[authzSnapshot]
}

// configure sets what the authorizer checks against. REQUIRES: called
// once, before any check (New).
func (z *authorizer) configure(on bool, superUsers []string, store aclStore, log *slog.Logger) {
	z.on, z.superUsers, z.store, z.log = on, superUsers, store, log
}

// authzSnapshot is one immutable view of the ACLs. revision is the etcd
// revision the list was read at (0 for the initial empty snapshot).
type authzSnapshot struct {
	z        *auth.Authorizer
	acls     []auth.ACL
	revision int64
}

// snapshot returns the current snapshot; before the first load an empty
// one (deny all but super users), installed on first use.
func (z *authorizer) snapshot() *authzSnapshot {
	if s := z.current.Load(); s != nil {
		return s
	}
	s := &authzSnapshot{z: auth.NewAuthorizer(nil, z.superUsers)}
	z.current.CompareAndSwap(nil, s)
	return z.current.Load()
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

// allowed reports whether the request's principal may do op on the
// resource. Always true when the authorizer is off.
func (z *authorizer) allowed(rc *requestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	if !z.on {
		return true
	}
	principal, host := principalOf(rc)
	if z.snapshot().z.Authorized(principal, host, op, rt, name) {
		return true
	}
	z.log.Debug("request denied", "principal", principal, "host", host, "operation", op,
		"resource_type", rt, "resource", name, "api_key", apiKeyOf(rc))
	return false
}

func apiKeyOf(rc *requestContext) int16 {
	if rc == nil {
		return -1
	}
	return rc.apiKey
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

// allowedIdempotentWrite is Kafka's check for InitProducerId without a
// transactional id (KIP-679): IdempotentWrite on the Cluster, or Write on
// any topic. "Any topic" is decided on the ACL list: some ALLOW of Write
// (or All) on a topic pattern for the principal (or User:*) and host (or
// *), and no DENY of Write (or All) on every topic (literal "*") for them.
// Kafka's authorizeByResourceType also weighs denies of narrower patterns
// against the allows; a principal whose every topic allow is shadowed by
// such denies gets an id here but cannot write anywhere with it.
func (z *authorizer) allowedIdempotentWrite(rc *requestContext) bool {
	if z.allowedCluster(rc, auth.OpIdempotentWrite) {
		return true
	}
	principal, host := principalOf(rc)
	allowed := false
	for _, a := range z.snapshot().acls {
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

// operations is the authorized_operations bit field of a
// resource for the request's principal (Metadata, DescribeCluster,
// DescribeGroups when the client asks): every supported operation when
// the authorizer is off, as Kafka.
func (z *authorizer) operations(rc *requestContext, rt auth.ResourceType, name string) int32 {
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
		if !z.on || z.allowedQuiet(rc, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// allowedQuiet is allowed without the denial log (for bit fields, where
// a denial is an answer, not an event).
func (z *authorizer) allowedQuiet(rc *requestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	if !z.on {
		return true
	}
	principal, host := principalOf(rc)
	return z.snapshot().z.Authorized(principal, host, op, rt, name)
}

// start loads the ACLs once and starts the loop that reloads them on
// every change until lifetime ends; loops counts the loop's goroutine.
// The watch starts before the load, so a change between the two is not
// missed. With the authorizer off nothing runs.
func (z *authorizer) start(ctx, lifetime context.Context, loops *sync.WaitGroup) error {
	if !z.on {
		return nil
	}
	changes := z.store.WatchSecurity(lifetime)
	if err := z.reload(ctx); err != nil {
		return err
	}
	loops.Add(1)
	go func() {
		defer loops.Done()
		z.loop(lifetime, changes)
	}()
	return nil
}

// loop reloads the snapshot after each change until lifetime ends. A failed reload keeps the old snapshot and is retried after a
// second; a watch channel that closes while the broker lives is opened
// again (followed by a reload: changes may have been missed).
func (z *authorizer) loop(lifetime context.Context, changes <-chan struct{}) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-lifetime.Done():
			return
		case _, ok := <-changes:
			if !ok {
				select {
				case <-lifetime.Done():
					return
				case <-time.After(time.Second):
				}
				changes = z.store.WatchSecurity(lifetime)
			}
		case <-retry.C:
		}
		ctx, cancel := context.WithTimeout(lifetime, authzReloadTimeout)
		err := z.reload(ctx)
		cancel()
		if err != nil && lifetime.Err() == nil {
			z.log.Warn("reloading ACLs; the previous ones stay in force", "err", err)
			retry.Reset(time.Second)
		}
	}
}

// reload reads every ACL and installs a new snapshot, unless a newer one
// is already in place.
func (z *authorizer) reload(ctx context.Context) error {
	acls, rev, err := z.store.ACLs(ctx)
	if err != nil {
		return err
	}
	next := &authzSnapshot{z: auth.NewAuthorizer(acls, z.superUsers), acls: slices.Clone(acls), revision: rev}
	for {
		cur := z.current.Load()
		if cur != nil && cur.revision > rev {
			return nil
		}
		if z.current.CompareAndSwap(cur, next) {
			z.log.Debug("ACLs loaded", "acls", len(acls), "revision", rev)
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
		if name, ok = b.parts.topicName(id); !ok {
			return 0
		}
	}
	if !b.authz.allowedTopic(rc, op, name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}
