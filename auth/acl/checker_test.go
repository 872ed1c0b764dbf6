package acl

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/auth"
)

// memACLStore is an in-memory Store: set replaces the ACLs at a new
// revision and signals the watchers, as an etcd write would.
type memACLStore struct {
	mu       sync.Mutex
	acls     []auth.ACL
	revision int64
	watchers []chan struct{}
}

var _ Store = (*memACLStore)(nil)

func (s *memACLStore) ACLs(ctx context.Context) ([]auth.ACL, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]auth.ACL(nil), s.acls...), s.revision, ctx.Err()
}

func (s *memACLStore) WatchSecurity(context.Context) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{}, 1)
	s.watchers = append(s.watchers, ch)
	return ch
}

func (s *memACLStore) set(acls ...auth.ACL) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acls, s.revision = acls, s.revision+1
	for _, w := range s.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func readTopicACL(principal, topic string) auth.ACL {
	return auth.ACL{ResourceType: auth.ResourceTopic, ResourceName: topic, PatternType: auth.PatternLiteral,
		Principal: principal, Host: auth.Wildcard, Operation: auth.OpRead, Permission: auth.PermissionAllow}
}

// allowedTopic checks op on a topic for r.
func (z *Checker) allowedTopic(r Requester, op auth.Operation, topic string) bool {
	return z.Allowed(r, op, auth.ResourceTopic, topic)
}

// The checker on its own, through Store: off allows all; on, only
// super users pass before the first load; the loop follows the store; an
// older revision never replaces a newer snapshot.
func TestAuthorizerFollowsItsStore(t *testing.T) {
	alice := Requester{Principal: "User:alice", Host: "10.0.0.1"}
	var off Checker
	if !off.allowedTopic(alice, auth.OpDelete, "t") || off.Operations(alice, auth.ResourceGroup, "g") != 1<<auth.OpRead|1<<auth.OpDescribe|1<<auth.OpDelete {
		t.Fatal("an authorizer that is off denied something")
	}

	store := &memACLStore{}
	var z Checker
	z.Configure(true, auth.Policy{SuperUsers: []string{"User:admin"}}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if z.allowedTopic(alice, auth.OpRead, "t") || !z.Allowed(Requester{Principal: "User:admin"}, auth.OpAlter, auth.ResourceCluster, auth.ClusterResourceName) {
		t.Fatal("before the first load only super users may pass")
	}
	lifetime, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	defer func() { cancel(); loops.Wait() }()
	if err := z.Start(context.Background(), lifetime, &loops); err != nil {
		t.Fatal(err)
	}
	store.set(readTopicACL("User:alice", "t"))
	deadline := time.Now().Add(10 * time.Second)
	for !z.allowedTopic(alice, auth.OpRead, "t") {
		if time.Now().After(deadline) {
			t.Fatal("the loop did not pick up the new ACL")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if z.allowedTopic(alice, auth.OpWrite, "t") || z.allowedTopic(alice, auth.OpRead, "u") {
		t.Fatal("an ACL allowed more than it names")
	}

	newer := z.Snapshot()
	z.current.Store(&Snapshot{z: newer.z, acls: newer.acls, revision: newer.revision + 10})
	store.set() // revision below the installed one
	if err := z.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !z.allowedTopic(alice, auth.OpRead, "t") {
		t.Fatal("an older revision replaced a newer snapshot")
	}
}

// KIP-679's rule, on the snapshot: IdempotentWrite on the cluster, or some
// Write (or All) on topics for the principal or User:*, unless Write on
// every topic is denied to it.
func TestAllowedIdempotentWrite(t *testing.T) {
	topicACL := func(principal, name string, op auth.Operation, perm auth.Permission) auth.ACL {
		return auth.ACL{ResourceType: auth.ResourceTopic, ResourceName: name, PatternType: auth.PatternLiteral,
			Principal: principal, Host: auth.Wildcard, Operation: op, Permission: perm}
	}
	clusterIdem := auth.ACL{ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterResourceName,
		PatternType: auth.PatternLiteral, Principal: "User:alice", Host: auth.Wildcard,
		Operation: auth.OpIdempotentWrite, Permission: auth.PermissionAllow}
	alice := Requester{Principal: "User:alice", Host: "10.0.0.1"}
	cases := []struct {
		name string
		acls []auth.ACL
		want bool
	}{
		{"nothing", nil, false},
		{"cluster IdempotentWrite", []auth.ACL{clusterIdem}, true},
		{"write on one topic", []auth.ACL{topicACL("User:alice", "t", auth.OpWrite, auth.PermissionAllow)}, true},
		{"all for every user", []auth.ACL{topicACL("User:*", "t", auth.OpAll, auth.PermissionAllow)}, true},
		{"read only", []auth.ACL{topicACL("User:alice", "t", auth.OpRead, auth.PermissionAllow)}, false},
		{"someone else", []auth.ACL{topicACL("User:bob", "t", auth.OpWrite, auth.PermissionAllow)}, false},
		{"write denied on every topic", []auth.ACL{topicACL("User:alice", "t", auth.OpWrite, auth.PermissionAllow),
			topicACL("User:alice", "*", auth.OpWrite, auth.PermissionDeny)}, false},
	}
	for _, tc := range cases {
		store := &memACLStore{}
		store.set(tc.acls...)
		var z Checker
		z.Configure(true, auth.Policy{}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err := z.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := z.AllowedIdempotentWrite(alice); got != tc.want {
			t.Errorf("%s: AllowedIdempotentWrite = %v, want %v", tc.name, got, tc.want)
		}
	}
}
