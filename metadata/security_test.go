package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

var securityCases = []storeCase{
	{"ScramCredentials", testScramCredentials},
	{"SecurityCorruptValues", testSecurityCorruptValues},
	{"ACLs", testACLs},
	{"ACLsConcurrentCreate", testACLsConcurrentCreate},
	{"ACLsManyChunks", testACLsManyChunks},
	{"Quotas", testQuotas},
	{"WatchSecurity", testWatchSecurity},
}

func runSecurityCases(t *testing.T, endpoints []string) {
	for i, c := range securityCases {
		t.Run(c.name, func(t *testing.T) {
			cluster := fmt.Sprintf("sec%d-%d", i, time.Now().UnixNano())
			c.run(t, &env{endpoints: endpoints, cluster: cluster, store: openStore(t, endpoints, cluster)})
		})
	}
}

func TestSecurityEmbedded(t *testing.T) { runSecurityCases(t, metadatatest.StartEmbedded(t)) }

func TestSecurityExternal(t *testing.T) { runSecurityCases(t, metadatatest.StartExternal(t)) }

func rawGet(t *testing.T, s *metadata.Store, key string) (string, int64, bool) {
	t.Helper()
	resp, err := s.Client().Get(testCtx(t), "/strata/"+s.Cluster()+"/"+key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, false
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, true
}

func rawPut(t *testing.T, s *metadata.Store, key, value string) {
	t.Helper()
	if _, err := s.Client().Put(testCtx(t), "/strata/"+s.Cluster()+"/"+key, value); err != nil {
		t.Fatal(err)
	}
}

func mustCredential(t *testing.T, mech, password string) auth.ScramCredential {
	t.Helper()
	c, err := auth.NewScramCredential(mech, password, auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testScramCredentials(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	weird := "we/ird user%2F"
	creds := map[string]map[string]auth.ScramCredential{}
	for _, user := range []string{"alice", weird} {
		creds[user] = map[string]auth.ScramCredential{}
		for _, mech := range []string{auth.MechScramSHA256, auth.MechScramSHA512} {
			c := mustCredential(t, mech, "password-of-"+user)
			creds[user][mech] = c
			if err := s.PutScramCredential(ctx, user, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, found, err := e.open(t).ScramCredential(ctx, weird, auth.MechScramSHA512)
	if err != nil || !found || !reflect.DeepEqual(got, creds[weird][auth.MechScramSHA512]) {
		t.Fatalf("read back %+v found %v err %v", got, found, err)
	}
	raw, _, ok := rawGet(t, s, "scram/alice/SCRAM-SHA-256")
	if !ok || strings.Contains(raw, "password-of") || !strings.Contains(raw, `"iterations":4096`) {
		t.Fatalf("stored value %q", raw)
	}
	users, err := s.ScramUsers(ctx)
	if err != nil || len(users) != 2 || len(users[weird]) != 2 || users["alice"][0].Mechanism != auth.MechScramSHA256 {
		t.Fatalf("ScramUsers %v err %v", users, err)
	}
	if err := s.DeleteScramCredential(ctx, "alice", auth.MechScramSHA256); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.ScramCredential(ctx, "alice", auth.MechScramSHA256); found || err != nil {
		t.Fatalf("deleted credential: found %v err %v", found, err)
	}
	if err := s.DeleteScramCredential(ctx, "alice", auth.MechScramSHA256); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, found, _ := s.ScramCredential(ctx, "alice", auth.MechScramSHA512); !found {
		t.Fatal("deleting one mechanism removed the other")
	}
	// Replacing a credential (password change) keeps one entry.
	replacement := mustCredential(t, auth.MechScramSHA512, "new")
	if err := s.PutScramCredential(ctx, "alice", replacement); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ScramCredential(ctx, "alice", auth.MechScramSHA512); !reflect.DeepEqual(got, replacement) {
		t.Fatal("credential not replaced")
	}
	bad := replacement
	bad.Iterations = 10
	if err := s.PutScramCredential(ctx, "alice", bad); !errors.Is(err, auth.ErrInvalidCredential) {
		t.Fatalf("invalid credential stored: %v", err)
	}
	if err := s.PutScramCredential(ctx, "", replacement); err == nil {
		t.Fatal("empty user accepted")
	}
	if _, _, err := s.ScramCredential(ctx, "alice", "SCRAM-SHA-1"); !errors.Is(err, auth.ErrUnknownMechanism) {
		t.Fatalf("unknown mechanism: %v", err)
	}
}

// Values written behind the store's back (another version, etcdctl,
// corruption) are skipped by listings and reported by single reads.
func testSecurityCorruptValues(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	good := mustCredential(t, auth.MechScramSHA256, "pw")
	if err := s.PutScramCredential(ctx, "alice", good); err != nil {
		t.Fatal(err)
	}
	rawPut(t, s, "scram/bob/SCRAM-SHA-256", "{not json")
	rawPut(t, s, "scram/carol/SCRAM-SHA-512", `{"salt":"AAAA","iterations":1,"storedKey":"AAAA","serverKey":"AAAA"}`)
	rawPut(t, s, "scram/bad%zz/SCRAM-SHA-256", `{}`)
	rawPut(t, s, "scram/dave/SCRAM-SHA-1", `{}`)
	rawPut(t, s, "scram/nomech", `{}`)
	if _, _, err := s.ScramCredential(ctx, "bob", auth.MechScramSHA256); !errors.Is(err, metadata.ErrCorrupt) {
		t.Fatalf("corrupt credential read: %v", err)
	}
	if _, _, err := s.ScramCredential(ctx, "carol", auth.MechScramSHA512); !errors.Is(err, metadata.ErrCorrupt) {
		t.Fatalf("out-of-range credential read: %v", err)
	}
	users, err := s.ScramUsers(ctx)
	if err != nil || len(users) != 1 || len(users["alice"]) != 1 {
		t.Fatalf("ScramUsers with corrupt entries: %v err %v", users, err)
	}
	valid := auth.ACL{ResourceType: auth.ResourceTopic, ResourceName: "t", PatternType: auth.PatternLiteral,
		Principal: "User:a", Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow}
	if err := s.CreateACLs(ctx, []auth.ACL{valid}); err != nil {
		t.Fatal(err)
	}
	rawPut(t, s, "acls/0000000000000001", `{"resourceType":2,"resourceName":"t","patternType":2,"principal":"User:a","host":"*","operation":3,"permission":3}`)
	rawPut(t, s, "acls/0000000000000002", `{"resourceType":300}`)
	rawPut(t, s, "acls/0000000000000003", `{"resourceName":"`+strings.Repeat("x", 70<<10)+`"}`)
	rawPut(t, s, "acls/0000000000000004", `[]`)
	acls, _, err := s.ACLs(ctx)
	if err != nil || len(acls) != 1 || acls[0] != valid {
		t.Fatalf("ACLs with corrupt entries: %v err %v", acls, err)
	}
	if deleted, err := s.DeleteACLs(ctx, anyACLFilter()); err != nil || len(deleted) != 1 {
		t.Fatalf("DeleteACLs with corrupt entries: %v err %v", deleted, err)
	}
	if err := s.AlterQuotas(ctx, metadata.QuotaEntity{User: "u"}, map[string]float64{"producer_byte_rate": 10}, nil); err != nil {
		t.Fatal(err)
	}
	rawPut(t, s, "quotas/user=v", `{"producer_byte_rate":-1}`)
	rawPut(t, s, "quotas/user=w", `{}`)
	rawPut(t, s, "quotas/user=x", `{"a":"b"}`)
	rawPut(t, s, "quotas/bogus=x", `{"producer_byte_rate":1}`)
	rawPut(t, s, "quotas/client-id=a,user=b", `{"producer_byte_rate":1}`) // not canonical order
	rawPut(t, s, "quotas/user=%zz", `{"producer_byte_rate":1}`)
	rawPut(t, s, "quotas/user=<default>,user=b", `{"producer_byte_rate":1}`)
	quotas, err := s.Quotas(ctx)
	if err != nil || len(quotas) != 1 || quotas[metadata.QuotaEntity{User: "u"}]["producer_byte_rate"] != 10 {
		t.Fatalf("Quotas with corrupt entries: %v err %v", quotas, err)
	}
	// A corrupt record is replaced by the next alteration, not kept.
	if err := s.AlterQuotas(ctx, metadata.QuotaEntity{User: "x"}, map[string]float64{"consumer_byte_rate": 5}, nil); err != nil {
		t.Fatal(err)
	}
	if q, _ := s.Quotas(ctx); !maps.Equal(q[metadata.QuotaEntity{User: "x"}], map[string]float64{"consumer_byte_rate": 5}) {
		t.Fatalf("quotas after replacing a corrupt record: %v", q)
	}
}

func anyACLFilter() auth.ACLFilter {
	return auth.ACLFilter{ResourceType: auth.ResourceAny, PatternType: auth.PatternAny, Operation: auth.OpAny,
		Permission: auth.PermissionAny}
}

func topicACL(name string, pt auth.PatternType, principal string, op auth.Operation) auth.ACL {
	return auth.ACL{ResourceType: auth.ResourceTopic, ResourceName: name, PatternType: pt, Principal: principal,
		Host: "*", Operation: op, Permission: auth.PermissionAllow}
}

func sameACLs(a, b []auth.ACL) bool {
	key := func(x auth.ACL) string { return x.String() }
	set := map[string]int{}
	for _, x := range a {
		set[key(x)]++
	}
	for _, x := range b {
		set[key(x)]--
	}
	for _, n := range set {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func testACLs(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	a := topicACL("orders", auth.PatternLiteral, "User:alice", auth.OpRead)
	b := topicACL("ord", auth.PatternPrefixed, "User:bob", auth.OpWrite)
	c := auth.ACL{ResourceType: auth.ResourceGroup, ResourceName: "g", PatternType: auth.PatternLiteral,
		Principal: "User:*", Host: "10.0.0.1", Operation: auth.OpRead, Permission: auth.PermissionDeny}
	if err := s.CreateACLs(ctx, []auth.ACL{a, b, a, c}); err != nil {
		t.Fatal(err)
	}
	acls, rev, err := s.ACLs(ctx)
	if err != nil || rev == 0 || !sameACLs(acls, []auth.ACL{a, b, c}) {
		t.Fatalf("ACLs %v rev %d err %v", acls, rev, err)
	}
	// Creating an existing ACL again writes nothing.
	before, err := s.Client().Get(ctx, "/strata/"+s.Cluster()+"/acls/", clientPrefix()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.open(t).CreateACLs(ctx, []auth.ACL{a}); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Client().Get(ctx, "/strata/"+s.Cluster()+"/acls/", clientPrefix()...)
	if len(after.Kvs) != 3 || !reflect.DeepEqual(after.Kvs, before.Kvs) {
		t.Fatalf("re-creating an ACL changed the keys: %v -> %v", before.Kvs, after.Kvs)
	}
	invalid := a
	invalid.PatternType = auth.PatternMatch
	if err := s.CreateACLs(ctx, []auth.ACL{topicACL("new", auth.PatternLiteral, "User:x", auth.OpRead), invalid}); !errors.Is(err, auth.ErrInvalidACL) {
		t.Fatalf("invalid ACL: %v", err)
	}
	if acls, _, _ := s.ACLs(ctx); len(acls) != 3 {
		t.Fatalf("a batch with an invalid ACL stored something: %v", acls)
	}
	match := auth.ACLFilter{ResourceType: auth.ResourceTopic, ResourceName: "orders", PatternType: auth.PatternMatch,
		Operation: auth.OpAny, Permission: auth.PermissionAny}
	deleted, err := s.DeleteACLs(ctx, match)
	if err != nil || !sameACLs(deleted, []auth.ACL{a, b}) {
		t.Fatalf("DeleteACLs(match orders) = %v err %v", deleted, err)
	}
	if deleted, err := s.DeleteACLs(ctx, match); err != nil || len(deleted) != 0 {
		t.Fatalf("second delete %v err %v", deleted, err)
	}
	if acls, _, _ := s.ACLs(ctx); !sameACLs(acls, []auth.ACL{c}) {
		t.Fatalf("remaining ACLs %v", acls)
	}
}

func testACLsConcurrentCreate(t *testing.T, e *env) {
	ctx := testCtx(t)
	var want []auth.ACL
	for i := range 10 {
		want = append(want, topicACL(fmt.Sprintf("t%d", i), auth.PatternLiteral, "User:alice", auth.OpRead))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		s := e.open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.CreateACLs(ctx, want)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if acls, _, err := e.store.ACLs(ctx); err != nil || !sameACLs(acls, want) {
		t.Fatalf("after concurrent creates: %d ACLs err %v", len(acls), err)
	}
}

// More ACLs than one transaction carries.
func testACLsManyChunks(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	var want []auth.ACL
	for i := range 150 {
		want = append(want, topicACL(fmt.Sprintf("topic-%03d", i), auth.PatternLiteral, "User:alice", auth.OpWrite))
	}
	if err := s.CreateACLs(ctx, want); err != nil {
		t.Fatal(err)
	}
	if acls, _, _ := s.ACLs(ctx); len(acls) != 150 {
		t.Fatalf("%d ACLs stored, want 150", len(acls))
	}
	deleted, err := s.DeleteACLs(ctx, auth.ACLFilter{ResourceType: auth.ResourceTopic, PatternType: auth.PatternLiteral,
		Principal: "User:alice", Operation: auth.OpWrite, Permission: auth.PermissionAllow})
	if err != nil || !sameACLs(deleted, want) {
		t.Fatalf("deleted %d err %v", len(deleted), err)
	}
	if acls, _, _ := s.ACLs(ctx); len(acls) != 0 {
		t.Fatalf("%d ACLs left", len(acls))
	}
}

func testQuotas(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	entities := map[metadata.QuotaEntity]map[string]float64{
		{User: "alice"}:                            {"producer_byte_rate": 1 << 20, "consumer_byte_rate": 2 << 20},
		{DefaultUser: true}:                        {"producer_byte_rate": 1024},
		{User: "a,b=c/<default>", ClientID: "x y"}: {"request_percentage": 12.5},
		{DefaultUser: true, DefaultClientID: true}: {"consumer_byte_rate": 7},
		{ClientID: "app"}:                          {"producer_byte_rate": 3},
		{DefaultClientID: true}:                    {"producer_byte_rate": 4},
		{User: "<default>"}:                        {"producer_byte_rate": 5}, // a user literally named so
	}
	for entity, quotas := range entities {
		if err := s.AlterQuotas(ctx, entity, quotas, nil); err != nil {
			t.Fatalf("%+v: %v", entity, err)
		}
	}
	got, err := e.open(t).Quotas(ctx)
	if err != nil || !maps.EqualFunc(got, entities, maps.Equal) {
		t.Fatalf("Quotas = %v err %v, want %v", got, err, entities)
	}
	alice := metadata.QuotaEntity{User: "alice"}
	if err := s.AlterQuotas(ctx, alice, map[string]float64{"request_percentage": 50}, []string{"consumer_byte_rate", "absent"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Quotas(ctx)
	if want := map[string]float64{"producer_byte_rate": 1 << 20, "request_percentage": 50}; !maps.Equal(got[alice], want) {
		t.Fatalf("alice after alter %v, want %v", got[alice], want)
	}
	if err := s.AlterQuotas(ctx, alice, nil, []string{"producer_byte_rate", "request_percentage"}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := rawGet(t, s, "quotas/user=alice"); ok {
		t.Fatal("entity without quotas still stored")
	}
	invalid := []struct {
		e   metadata.QuotaEntity
		set map[string]float64
	}{
		{metadata.QuotaEntity{}, map[string]float64{"a": 1}},
		{metadata.QuotaEntity{User: "u", DefaultUser: true}, map[string]float64{"a": 1}},
		{metadata.QuotaEntity{ClientID: "c", DefaultClientID: true}, map[string]float64{"a": 1}},
		{metadata.QuotaEntity{User: "u"}, map[string]float64{"a": -1}},
		{metadata.QuotaEntity{User: "u"}, map[string]float64{"": 1}},
		{metadata.QuotaEntity{User: "u"}, map[string]float64{"bad name": 1}},
		{metadata.QuotaEntity{User: "u"}, map[string]float64{"nan": nan()}},
		{metadata.QuotaEntity{User: "\xff"}, map[string]float64{"a": 1}},
	}
	for _, c := range invalid {
		if err := s.AlterQuotas(ctx, c.e, c.set, nil); !errors.Is(err, metadata.ErrInvalidConfig) {
			t.Errorf("AlterQuotas(%+v, %v) = %v, want ErrInvalidConfig", c.e, c.set, err)
		}
	}
	tooMany := map[string]float64{}
	for i := range metadata.MaxQuotasPerEntity + 1 {
		tooMany[fmt.Sprintf("q%d", i)] = 1
	}
	if err := s.AlterQuotas(ctx, metadata.QuotaEntity{User: "u"}, tooMany, nil); !errors.Is(err, metadata.ErrInvalidConfig) {
		t.Errorf("%d quotas accepted: %v", len(tooMany), err)
	}
}

func testWatchSecurity(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes := s.WatchSecurity(watchCtx)
	// Unrelated writes do not signal.
	if _, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}}}); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, changes)
	writes := map[string]func() error{
		"scram": func() error {
			return s.PutScramCredential(ctx, "alice", mustCredential(t, auth.MechScramSHA256, "pw"))
		},
		"acl": func() error {
			return s.CreateACLs(ctx, []auth.ACL{topicACL("t", auth.PatternLiteral, "User:alice", auth.OpRead)})
		},
		"quota": func() error {
			return s.AlterQuotas(ctx, metadata.QuotaEntity{User: "alice"}, map[string]float64{"producer_byte_rate": 1}, nil)
		},
		"scram delete": func() error { return s.DeleteScramCredential(ctx, "alice", auth.MechScramSHA256) },
	}
	for _, name := range []string{"scram", "acl", "quota", "scram delete"} {
		if err := writes[name](); err != nil {
			t.Fatal(err)
		}
		expectSignal(t, changes, name)
	}
	// Several changes while nobody reads coalesce into one pending value.
	for i := range 5 {
		if err := s.AlterQuotas(ctx, metadata.QuotaEntity{User: "bob"}, map[string]float64{"producer_byte_rate": float64(i + 1)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	expectSignal(t, changes, "coalesced quota writes")
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed after ctx ended")
		}
	}
}

func expectSignal(t *testing.T, changes <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-changes:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no signal", what)
	}
	// Drain a second value that a burst may have produced, so the next
	// expectation sees only its own change.
	time.Sleep(100 * time.Millisecond)
	select {
	case <-changes:
	default:
	}
}

func expectQuiet(t *testing.T, changes <-chan struct{}) {
	t.Helper()
	select {
	case <-changes:
		t.Fatal("signal without a security change")
	case <-time.After(300 * time.Millisecond):
	}
}

func clientPrefix() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }

func nan() float64 { return math.NaN() }
