package auth

import (
	"errors"
	"testing"
)

func allow(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host,
		Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) ACL {
	a := allow(rt, name, pt, principal, host, op)
	a.Permission = PermissionDeny
	return a
}

const (
	alice = "User:alice"
	bob   = "User:bob"
	lit   = PatternLiteral
	pre   = PatternPrefixed
	topic = ResourceTopic
)

type authzQuery struct {
	principal, host string
	op              Operation
	rt              ResourceType
	name            string
	want            bool
}

// Cases follow Kafka's StandardAuthorizer (AuthorizerTest / AclAuthorizerTest
// semantics).
var authzCases = []struct {
	name    string
	acls    []ACL
	supers  []string
	queries []authzQuery
}{
	{"deny by default", nil, nil, []authzQuery{
		{alice, "1.2.3.4", OpRead, topic, "orders", false},
		{alice, "1.2.3.4", OpDescribe, ResourceCluster, ClusterResourceName, false},
	}},
	{"super user", []ACL{deny(topic, "orders", lit, alice, "*", OpAll)}, []string{alice, " User:root "}, []authzQuery{
		{alice, "h", OpWrite, topic, "orders", true}, // super users ignore even DENY
		{"User:root", "h", OpClusterAction, ResourceCluster, ClusterResourceName, true},
		{"Group:alice", "h", OpRead, topic, "orders", false},
		{bob, "h", OpRead, topic, "orders", false},
	}},
	{"literal allow", []ACL{allow(topic, "orders", lit, alice, "*", OpRead)}, nil, []authzQuery{
		{alice, "h", OpRead, topic, "orders", true},
		{alice, "h", OpRead, topic, "orders2", false},
		{alice, "h", OpRead, topic, "order", false},
		{alice, "h", OpWrite, topic, "orders", false},
		{bob, "h", OpRead, topic, "orders", false},
		{"User:Alice", "h", OpRead, topic, "orders", false}, // principals are case sensitive
		{alice, "h", OpRead, ResourceGroup, "orders", false},
	}},
	{"implied describe", []ACL{
		allow(topic, "r", lit, alice, "*", OpRead), allow(topic, "w", lit, alice, "*", OpWrite),
		allow(topic, "d", lit, alice, "*", OpDelete), allow(topic, "a", lit, alice, "*", OpAlter),
		allow(topic, "c", lit, alice, "*", OpCreate), allow(topic, "ac", lit, alice, "*", OpAlterConfigs),
		allow(topic, "desc", lit, alice, "*", OpDescribe), allow(topic, "dc", lit, alice, "*", OpDescribeConfigs),
	}, nil, []authzQuery{
		{alice, "h", OpDescribe, topic, "r", true},
		{alice, "h", OpDescribe, topic, "w", true},
		{alice, "h", OpDescribe, topic, "d", true},
		{alice, "h", OpDescribe, topic, "a", true},
		{alice, "h", OpDescribe, topic, "c", false}, // Create does not imply Describe
		{alice, "h", OpDescribeConfigs, topic, "ac", true},
		{alice, "h", OpDescribe, topic, "ac", false},
		{alice, "h", OpRead, topic, "desc", false}, // implication goes one way
		{alice, "h", OpAlterConfigs, topic, "dc", false},
		{alice, "h", OpDescribeConfigs, topic, "r", false},
		{alice, "h", OpWrite, topic, "r", false},
	}},
	{"all", []ACL{allow(ResourceCluster, ClusterResourceName, lit, alice, "*", OpAll)}, nil, []authzQuery{
		{alice, "h", OpClusterAction, ResourceCluster, ClusterResourceName, true},
		{alice, "h", OpIdempotentWrite, ResourceCluster, ClusterResourceName, true},
		{alice, "h", OpDescribeConfigs, ResourceCluster, ClusterResourceName, true},
		{alice, "h", OpRead, topic, "any", false},
	}},
	{"deny overrides allow", []ACL{
		allow(topic, "orders", lit, alice, "*", OpAll), deny(topic, "orders", lit, alice, "*", OpWrite),
	}, nil, []authzQuery{
		{alice, "h", OpWrite, topic, "orders", false},
		{alice, "h", OpRead, topic, "orders", true},
		{alice, "h", OpDescribe, topic, "orders", true},
	}},
	{"deny does not extend to implied operations", []ACL{
		allow(topic, "orders", lit, alice, "*", OpDescribe), deny(topic, "orders", lit, alice, "*", OpRead),
	}, nil, []authzQuery{
		{alice, "h", OpDescribe, topic, "orders", true},
		{alice, "h", OpRead, topic, "orders", false},
	}},
	{"deny all", []ACL{
		allow(topic, "orders", lit, alice, "*", OpRead), deny(topic, "*", lit, alice, "*", OpAll),
	}, nil, []authzQuery{
		{alice, "h", OpRead, topic, "orders", false},
		{alice, "h", OpDescribe, topic, "orders", false},
	}},
	{"wildcard principal", []ACL{
		allow(topic, "orders", lit, "User:*", "*", OpRead), deny(topic, "secret", lit, "User:*", "*", OpRead),
		allow(topic, "secret", lit, alice, "*", OpRead), allow(topic, "groups", lit, "Group:*", "*", OpRead),
	}, nil, []authzQuery{
		{alice, "h", OpRead, topic, "orders", true},
		{AnonymousPrincipal, "h", OpRead, topic, "orders", true},
		{alice, "h", OpRead, topic, "secret", false}, // wildcard DENY beats the specific ALLOW
		{alice, "h", OpRead, topic, "groups", false}, // another principal type's wildcard
		{"nocolon", "h", OpRead, topic, "orders", false},
	}},
	{"hosts", []ACL{
		allow(topic, "orders", lit, alice, "10.0.0.1", OpRead), allow(topic, "logs", lit, alice, "*", OpRead),
		deny(topic, "logs", lit, alice, "10.0.0.66", OpRead),
	}, nil, []authzQuery{
		{alice, "10.0.0.1", OpRead, topic, "orders", true},
		{alice, "10.0.0.2", OpRead, topic, "orders", false},
		{alice, "10.0.0.2", OpRead, topic, "logs", true},
		{alice, "10.0.0.66", OpRead, topic, "logs", false},
	}},
	{"literal wildcard resource", []ACL{allow(topic, "*", lit, alice, "*", OpWrite)}, nil, []authzQuery{
		{alice, "h", OpWrite, topic, "orders", true},
		{alice, "h", OpWrite, topic, "*", true},
		{alice, "h", OpDescribe, topic, "x", true},
		{alice, "h", OpWrite, ResourceGroup, "g", false},
		// IdempotentWrite on the cluster implied by Write on topics is the caller's rule.
		{alice, "h", OpIdempotentWrite, ResourceCluster, ClusterResourceName, false},
	}},
	{"prefixed", []ACL{
		allow(topic, "ord", pre, alice, "*", OpRead), deny(topic, "orders-secret", pre, alice, "*", OpRead),
		allow(ResourceGroup, "app-", pre, alice, "*", OpRead),
		allow(ResourceTransactionalID, "tx-", pre, alice, "*", OpWrite),
	}, nil, []authzQuery{
		{alice, "h", OpRead, topic, "orders", true},
		{alice, "h", OpRead, topic, "ord", true},
		{alice, "h", OpRead, topic, "or", false},
		{alice, "h", OpRead, topic, "xorders", false},
		{alice, "h", OpRead, topic, "orders-secret-1", false},
		{alice, "h", OpRead, topic, "*", false}, // a prefixed pattern is not a wildcard
		{alice, "h", OpRead, ResourceGroup, "app-1", true},
		{alice, "h", OpRead, ResourceGroup, "app", false},
		{alice, "h", OpWrite, ResourceTransactionalID, "tx-7", true},
		{alice, "h", OpDescribe, ResourceTransactionalID, "tx-7", true},
	}},
	{"invalid ACLs never match", []ACL{
		allow(topic, "orders", PatternMatch, alice, "*", OpRead),
		allow(ResourceAny, "orders", lit, alice, "*", OpRead),
		allow(topic, "orders", lit, alice, "*", OpAny),
		allow(topic, "", pre, alice, "*", OpRead),
	}, nil, []authzQuery{
		{alice, "h", OpRead, topic, "orders", false},
		{alice, "h", OpRead, topic, "x", false},
	}},
}

func TestAuthorizerKafkaCases(t *testing.T) {
	for _, c := range authzCases {
		t.Run(c.name, func(t *testing.T) {
			z := NewAuthorizer(c.acls, Policy{SuperUsers: c.supers})
			for _, q := range c.queries {
				if got := z.Authorized(q.principal, q.host, q.op, q.rt, q.name); got != q.want {
					t.Errorf("%s from %s: %s %s %q = %v, want %v", q.principal, q.host, q.op, q.rt, q.name, got, q.want)
				}
			}
		})
	}
	var nilAuthorizer *Authorizer
	if nilAuthorizer.Authorized(alice, "h", OpRead, topic, "t") {
		t.Fatal("nil authorizer allowed a request")
	}
}

// With AllowEveryoneIfNoACL, a resource is open only while no ACL's
// pattern matches it, whoever and whatever that ACL is for.
func TestAllowEveryoneIfNoACL(t *testing.T) {
	z := NewAuthorizer([]ACL{
		allow(topic, "orders", lit, alice, "*", OpWrite),
		deny(topic, "secret-", pre, bob, "*", OpRead),
	}, Policy{AllowEveryoneIfNoACL: true})
	for _, q := range []authzQuery{
		{bob, "h", OpRead, topic, "free", true},         // no ACL matches: open
		{bob, "h", OpAlter, ResourceCluster, "c", true}, // nor for another resource type
		{alice, "h", OpWrite, topic, "orders", true},    // allowed by its ACL
		{bob, "h", OpWrite, topic, "orders", false},     // guarded: alice's ACL matches the topic
		{alice, "h", OpRead, topic, "orders", false},    // guarded: no ALLOW for Read
		{alice, "h", OpRead, topic, "secret-x", false},  // guarded by bob's DENY
		{bob, "h", OpRead, topic, "secret-x", false},    // DENY wins
	} {
		if got := z.Authorized(q.principal, q.host, q.op, q.rt, q.name); got != q.want {
			t.Errorf("%s: %s %s %q = %v, want %v", q.principal, q.op, q.rt, q.name, got, q.want)
		}
	}
}

func TestACLValidate(t *testing.T) {
	good := allow(topic, "orders", lit, alice, "*", OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func(*ACL){
		"resource any":      func(a *ACL) { a.ResourceType = ResourceAny },
		"resource unknown":  func(a *ACL) { a.ResourceType = 9 },
		"pattern match":     func(a *ACL) { a.PatternType = PatternMatch },
		"pattern any":       func(a *ACL) { a.PatternType = PatternAny },
		"op any":            func(a *ACL) { a.Operation = OpAny },
		"op out of range":   func(a *ACL) { a.Operation = 13 },
		"permission any":    func(a *ACL) { a.Permission = PermissionAny },
		"empty name":        func(a *ACL) { a.ResourceName = "" },
		"empty host":        func(a *ACL) { a.Host = "" },
		"principal no type": func(a *ACL) { a.Principal = "alice" },
		"principal no name": func(a *ACL) { a.Principal = "User:" },
		"cluster name":      func(a *ACL) { a.ResourceType = ResourceCluster; a.ResourceName = "c" },
		"prefixed wildcard": func(a *ACL) { a.PatternType = PatternPrefixed; a.ResourceName = "*" },
		"oversized":         func(a *ACL) { a.ResourceName = string(make([]byte, MaxACLString+1)) },
		"not utf8":          func(a *ACL) { a.Principal = "User:\xff" },
	}
	for name, mutate := range mutations {
		a := good
		mutate(&a)
		if err := a.Validate(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%s: %v accepted (err %v)", name, a, err)
		}
	}
}

func TestACLFilterMatches(t *testing.T) {
	acls := map[string]ACL{
		"lit orders":  allow(topic, "orders", lit, alice, "*", OpRead),
		"lit *":       allow(topic, "*", lit, bob, "10.0.0.1", OpWrite),
		"pre ord":     deny(topic, "ord", pre, alice, "*", OpRead),
		"pre orders-": allow(topic, "orders-", pre, alice, "*", OpRead),
		"lit other":   allow(topic, "other", lit, alice, "*", OpRead),
		"group ord":   allow(ResourceGroup, "ord", lit, "User:*", "*", OpRead),
	}
	any := ACLFilter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(mutate func(*ACLFilter)) ACLFilter { f := any; mutate(&f); return f }
	cases := []struct {
		name   string
		filter ACLFilter
		want   []string
	}{
		{"everything", any, []string{"lit orders", "lit *", "pre ord", "pre orders-", "lit other", "group ord"}},
		{"match orders", with(func(f *ACLFilter) { f.ResourceType = topic; f.PatternType = PatternMatch; f.ResourceName = "orders" }),
			[]string{"lit orders", "lit *", "pre ord"}},
		{"any ord", with(func(f *ACLFilter) { f.PatternType = PatternAny; f.ResourceName = "ord" }),
			[]string{"pre ord", "group ord"}},
		{"literal *", with(func(f *ACLFilter) { f.PatternType = lit; f.ResourceName = "*" }), []string{"lit *"}},
		{"prefixed only", with(func(f *ACLFilter) { f.PatternType = pre }), []string{"pre ord", "pre orders-"}},
		{"principal", with(func(f *ACLFilter) { f.Principal = bob }), []string{"lit *"}},
		{"wildcard principal exact", with(func(f *ACLFilter) { f.Principal = "User:*" }), []string{"group ord"}},
		{"host", with(func(f *ACLFilter) { f.Host = "10.0.0.1" }), []string{"lit *"}},
		{"deny", with(func(f *ACLFilter) { f.Permission = PermissionDeny }), []string{"pre ord"}},
		{"write", with(func(f *ACLFilter) { f.Operation = OpWrite }), []string{"lit *"}},
		{"group", with(func(f *ACLFilter) { f.ResourceType = ResourceGroup }), []string{"group ord"}},
	}
	for _, c := range cases {
		want := map[string]bool{}
		for _, n := range c.want {
			want[n] = true
		}
		for name, a := range acls {
			if got := c.filter.Matches(a); got != want[name] {
				t.Errorf("%s: Matches(%s) = %v, want %v", c.name, name, got, want[name])
			}
		}
	}
	if err := any.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []ACLFilter{
		with(func(f *ACLFilter) { f.ResourceType = ResourceUnknown }),
		with(func(f *ACLFilter) { f.PatternType = PatternUnknown }),
		with(func(f *ACLFilter) { f.Operation = OpUnknown }),
		with(func(f *ACLFilter) { f.Permission = 7 }),
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("filter %+v accepted", f)
		}
	}
}

func TestEnumNames(t *testing.T) {
	if op, err := ParseOperation("describe-configs"); err != nil || op != OpDescribeConfigs {
		t.Fatalf("describe-configs: %v %v", op, err)
	}
	if rt, err := ParseResourceType("Transactional_Id"); err != nil || rt != ResourceTransactionalID {
		t.Fatalf("transactional id: %v %v", rt, err)
	}
	if _, err := ParsePermission("unknown"); err == nil {
		t.Fatal("UNKNOWN parsed")
	}
	if s := Operation(99).String(); s != "UNKNOWN(99)" {
		t.Fatalf("Operation(99) = %q", s)
	}
	if pt, err := ParsePatternType("prefixed"); err != nil || pt != PatternPrefixed || pt.String() != "PREFIXED" {
		t.Fatalf("prefixed: %v %v", pt, err)
	}
}
