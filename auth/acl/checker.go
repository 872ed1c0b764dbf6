package acl

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/auth"
)

// ReloadTimeout bounds one reload of the ACLs from the store.
const ReloadTimeout = 30 * time.Second

// watchRetry is how long the loop waits before retrying a failed reload or
// reopening a closed watch.
const watchRetry = time.Second

// Store is where the ACLs live (*metadata.Store implements it).
type Store interface {
	// ACLs returns every ACL and the etcd revision it was read at.
	ACLs(ctx context.Context) ([]auth.ACL, int64, error)
	// WatchSecurity signals changes under acls/ (and the other security
	// prefixes), coalesced; the channel closes when ctx ends.
	WatchSecurity(ctx context.Context) <-chan struct{}
}

// Requester is who a check is for.
type Requester struct {
	// Principal is "User:<name>" ("User:ANONYMOUS" unauthenticated).
	Principal string
	// Host is the client's address ("" for internal callers).
	Host string
	// APIKey is the Kafka API asking, for the denial log only (-1 for
	// internal callers).
	APIKey int16
}

// Snapshot is one immutable view of the ACLs (see the package comment).
type Snapshot struct {
	z        *auth.Authorizer
	acls     []auth.ACL
	revision int64
}

// Authorized applies auth.Authorizer's rules to the snapshot's ACLs.
func (s *Snapshot) Authorized(principal, host string, op auth.Operation, rt auth.ResourceType, name string) bool {
	return s.z.Authorized(principal, host, op, rt, name)
}

// ACLs is the list the snapshot was built from. Callers must not modify it.
func (s *Snapshot) ACLs() []auth.ACL { return s.acls }

// Checker is a broker's ACL checker (see the package comment). Its zero
// value allows everything (authorization off). It must not be copied.
//
// State: current is replaced only by Reload, with compare-and-swap; the
// other fields are set by Configure before any check and read-only
// afterwards.
type Checker struct {
	on     bool
	policy auth.Policy
	store  Store
	log    *slog.Logger

	current atomic.Pointer[Snapshot]
}

// Configure sets what the checker checks against: on turns authorization
// on (Kafka's authorizer.class.name set); policy names the super users and
// whether resources without ACLs are open. REQUIRES: called once, before
// any check.
func (z *Checker) Configure(on bool, policy auth.Policy, store Store, log *slog.Logger) {
	z.on, z.policy, z.store, z.log = on, policy, store, log
}

// Snapshot returns the current snapshot; before the first load an empty
// one (deny all but super users), installed on first use.
func (z *Checker) Snapshot() *Snapshot {
	if s := z.current.Load(); s != nil {
		return s
	}
	s := &Snapshot{z: auth.NewAuthorizer(nil, z.policy)}
	z.current.CompareAndSwap(nil, s)
	return z.current.Load()
}

// Allowed reports whether r may do op on the resource, logging a denial.
// Always true when the checker is off.
func (z *Checker) Allowed(r Requester, op auth.Operation, rt auth.ResourceType, name string) bool {
	if z.AllowedQuiet(r, op, rt, name) {
		return true
	}
	z.log.Debug("request denied", "principal", r.Principal, "host", r.Host, "operation", op,
		"resource_type", rt, "resource", name, "api_key", r.APIKey)
	return false
}

// AllowedQuiet is Allowed without the denial log (for bit fields and
// filters, where a denial is an answer, not an event).
func (z *Checker) AllowedQuiet(r Requester, op auth.Operation, rt auth.ResourceType, name string) bool {
	return !z.on || z.Snapshot().Authorized(r.Principal, r.Host, op, rt, name)
}

// AllowedIdempotentWrite is Kafka's check for InitProducerId without a
// transactional id (KIP-679): IdempotentWrite on the Cluster, or Write on
// any topic. "Any topic" is decided on the ACL list: some ALLOW of Write
// (or All) on a topic pattern for the principal (or User:*) and host (or
// *), and no DENY of Write (or All) on every topic (literal "*") for them.
// Kafka's authorizeByResourceType also weighs denies of narrower patterns
// against the allows; a principal whose every topic allow is shadowed by
// such denies gets an id here but cannot write anywhere with it.
func (z *Checker) AllowedIdempotentWrite(r Requester) bool {
	if z.Allowed(r, auth.OpIdempotentWrite, auth.ResourceCluster, auth.ClusterResourceName) {
		return true
	}
	allowed := false
	for _, a := range z.Snapshot().acls {
		if a.ResourceType != auth.ResourceTopic || (a.Operation != auth.OpWrite && a.Operation != auth.OpAll) ||
			!appliesTo(a, r.Principal, r.Host) {
			continue
		}
		if a.Permission == auth.PermissionDeny && a.PatternType == auth.PatternLiteral && a.ResourceName == "*" {
			return false
		}
		allowed = allowed || a.Permission == auth.PermissionAllow
	}
	return allowed
}

// appliesTo: the ACL names the principal (or every principal of its type,
// "User:*") and the host (or every host).
func appliesTo(a auth.ACL, principal, host string) bool {
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

// Operations is the authorized_operations bit field of a resource for r
// (Metadata, DescribeCluster, DescribeGroups when the client asks): every
// supported operation when the checker is off, as Kafka.
func (z *Checker) Operations(r Requester, rt auth.ResourceType, name string) int32 {
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
		if z.AllowedQuiet(r, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// Start loads the ACLs once and starts the loop that reloads them on every
// change until lifetime ends; loops counts the loop's goroutine. With the
// checker off nothing runs.
func (z *Checker) Start(ctx, lifetime context.Context, loops *sync.WaitGroup) error {
	if !z.on {
		return nil
	}
	changes := z.store.WatchSecurity(lifetime)
	if err := z.Reload(ctx); err != nil {
		return err
	}
	loops.Add(1)
	go func() {
		defer loops.Done()
		z.loop(lifetime, changes)
	}()
	return nil
}

// loop reloads the snapshot after each change until lifetime ends (retry
// rules in the package comment).
func (z *Checker) loop(lifetime context.Context, changes <-chan struct{}) {
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
				case <-time.After(watchRetry):
				}
				changes = z.store.WatchSecurity(lifetime)
			}
		case <-retry.C:
		}
		ctx, cancel := context.WithTimeout(lifetime, ReloadTimeout)
		err := z.Reload(ctx)
		cancel()
		if err != nil && lifetime.Err() == nil {
			z.log.Warn("reloading ACLs; the previous ones stay in force", "err", err)
			retry.Reset(watchRetry)
		}
	}
}

// ReloadAfterChange is Reload right after this broker's own ACL write,
// when authorization is on. A failure is logged and left to the watch,
// which would install the change a moment later anyway.
func (z *Checker) ReloadAfterChange(ctx context.Context) {
	if !z.on {
		return
	}
	if err := z.Reload(ctx); err != nil {
		z.log.Warn("reloading ACLs after a change; the watch will retry", "err", err)
	}
}

// Reload reads every ACL and installs a new snapshot, unless a newer one
// is already in place. The ACL handlers call it right after their own
// writes, so the writer sees its change without waiting for the watch.
func (z *Checker) Reload(ctx context.Context) error {
	acls, rev, err := z.store.ACLs(ctx)
	if err != nil {
		return err
	}
	next := &Snapshot{z: auth.NewAuthorizer(acls, z.policy), acls: slices.Clone(acls), revision: rev}
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
