package auth

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ResourceType is what an ACL protects; the values are Kafka's wire codes
// (kmsg ACLResourceType).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
)

// PatternType says how an ACL's resource name matches; Kafka's wire codes.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: literal or prefixed, name compared exactly
	PatternMatch    PatternType = 2 // filters only: every pattern that would match the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a principal does to a resource; Kafka's wire codes.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
)

// Permission is an ACL's verdict; Kafka's wire codes.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

const (
	// ClusterResourceName is the only name of the Cluster resource (Kafka's
	// "kafka-cluster").
	ClusterResourceName = "kafka-cluster"
	// Wildcard is the literal resource name that matches every name, and
	// the host that matches every host. "User:*" is the wildcard principal.
	Wildcard = "*"
	// AnonymousPrincipal is the principal of an unauthenticated connection.
	AnonymousPrincipal = "User:ANONYMOUS"
	// MaxACLString bounds each string of an ACL (resource name, principal,
	// host) so that a stored ACL and a request's ACL stay small.
	MaxACLString = 4096
)

// ACL is one access control entry bound to a resource pattern, as Kafka's
// AclBinding.
type ACL struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType // PatternLiteral or PatternPrefixed
	Principal    string      // "User:alice", or "User:*" for every user
	Host         string      // an IP address, or "*" for every host
	Operation    Operation
	Permission   Permission
}

func (a ACL) String() string {
	return fmt.Sprintf("(%s %s %q: %s %s %s from %s)", a.Permission, a.Operation, a.ResourceName,
		a.PatternType, a.ResourceType, a.Principal, a.Host)
}

// Validate checks an ACL as Kafka does before storing it: concrete types
// (no Any/Match/Unknown), a non-empty resource name ("kafka-cluster" for the
// cluster), a "Type:name" principal, a non-empty host, bounded UTF-8
// strings.
func (a ACL) Validate() error {
	switch a.ResourceType {
	case ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID:
	default:
		return fmt.Errorf("%w: resource type %d", ErrInvalidACL, a.ResourceType)
	}
	if a.PatternType != PatternLiteral && a.PatternType != PatternPrefixed {
		return fmt.Errorf("%w: pattern type %d", ErrInvalidACL, a.PatternType)
	}
	if a.Operation < OpAll || a.Operation > OpIdempotentWrite {
		return fmt.Errorf("%w: operation %d", ErrInvalidACL, a.Operation)
	}
	if a.Permission != PermissionDeny && a.Permission != PermissionAllow {
		return fmt.Errorf("%w: permission %d", ErrInvalidACL, a.Permission)
	}
	for _, s := range []string{a.ResourceName, a.Principal, a.Host} {
		if s == "" || len(s) > MaxACLString || !utf8.ValidString(s) {
			return fmt.Errorf("%w: empty, oversized or non-UTF-8 field in %v", ErrInvalidACL, a)
		}
	}
	if a.ResourceType == ResourceCluster && a.ResourceName != ClusterResourceName {
		return fmt.Errorf("%w: the cluster resource is named %q", ErrInvalidACL, ClusterResourceName)
	}
	if a.PatternType == PatternPrefixed && a.ResourceName == Wildcard {
		return fmt.Errorf("%w: a prefixed pattern cannot be the wildcard", ErrInvalidACL)
	}
	if kind, name, ok := strings.Cut(a.Principal, ":"); !ok || kind == "" || name == "" {
		return fmt.Errorf("%w: principal %q is not Type:name", ErrInvalidACL, a.Principal)
	}
	return nil
}

// ACLFilter selects ACLs as Kafka's AclBindingFilter: ResourceAny,
// PatternAny, OpAny, PermissionAny and an empty string (Kafka's null) match
// anything. PatternMatch selects every literal or prefixed pattern that
// would apply to ResourceName (literal equal, literal "*", prefixes of it);
// PatternAny selects patterns of either type whose name equals it.
// Principal and Host compare exactly ("User:*" selects only ACLs written
// for "User:*").
type ACLFilter struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// Validate rejects filters with Unknown values (Kafka: INVALID_REQUEST).
func (f ACLFilter) Validate() error {
	if f.ResourceType < ResourceAny || f.ResourceType > ResourceTransactionalID {
		return fmt.Errorf("%w: filter resource type %d", ErrInvalidACL, f.ResourceType)
	}
	if f.PatternType < PatternAny || f.PatternType > PatternPrefixed {
		return fmt.Errorf("%w: filter pattern type %d", ErrInvalidACL, f.PatternType)
	}
	if f.Operation < OpAny || f.Operation > OpIdempotentWrite {
		return fmt.Errorf("%w: filter operation %d", ErrInvalidACL, f.Operation)
	}
	if f.Permission < PermissionAny || f.Permission > PermissionAllow {
		return fmt.Errorf("%w: filter permission %d", ErrInvalidACL, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects a.
func (f ACLFilter) Matches(a ACL) bool {
	return f.matchesPattern(a) &&
		(f.Principal == "" || f.Principal == a.Principal) &&
		(f.Host == "" || f.Host == a.Host) &&
		(f.Operation == OpAny || f.Operation == a.Operation) &&
		(f.Permission == PermissionAny || f.Permission == a.Permission)
}

// matchesPattern is Kafka's ResourcePatternFilter.matches.
func (f ACLFilter) matchesPattern(a ACL) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != a.PatternType {
		return false
	}
	if f.ResourceName == "" {
		return true
	}
	if f.PatternType != PatternMatch {
		return f.ResourceName == a.ResourceName
	}
	return resourceMatches(a, f.ResourceName)
}

// resourceMatches: literal equal, literal "*", or prefixed prefix of name.
func resourceMatches(a ACL, name string) bool {
	switch a.PatternType {
	case PatternLiteral:
		return a.ResourceName == name || a.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	}
	return false
}

// Policy is what an Authorizer applies besides the ACLs.
type Policy struct {
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACL is Kafka's allow.everyone.if.no.acl.found: a
	// resource that no ACL matches (for any principal, host or operation)
	// is open to everyone.
	AllowEveryoneIfNoACL bool
}

// Authorizer decides requests from an immutable snapshot of the ACLs and
// the policy; build a new one when they change. Safe for concurrent use.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	// byType holds the ACLs of each resource type; only valid ACLs.
	byType map[ResourceType][]ACL
}

// NewAuthorizer snapshots acls (invalid ones are ignored: they can never
// match) and the policy.
func NewAuthorizer(acls []ACL, policy Policy) *Authorizer {
	z := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: policy.AllowEveryoneIfNoACL, byType: map[ResourceType][]ACL{}}
	for _, p := range policy.SuperUsers {
		if p = strings.TrimSpace(p); p != "" {
			z.superUsers[p] = true
		}
	}
	for _, a := range acls {
		if a.Validate() == nil {
			z.byType[a.ResourceType] = append(z.byType[a.ResourceType], a)
		}
	}
	return z
}

// Authorized applies Kafka's StandardAuthorizer rules: a super user may do
// anything; otherwise a matching DENY for op (or All) refuses; otherwise a
// matching ALLOW for op, for All, or for an operation implying op (Read,
// Write, Delete, Alter imply Describe; AlterConfigs implies
// DescribeConfigs) permits; otherwise the request is refused, unless the
// policy allows everyone on a resource that no ACL's pattern matches. An
// ACL matches when its principal is principal or "<type>:*", its host is
// host or "*", and its pattern matches name.
func (z *Authorizer) Authorized(principal, host string, op Operation, rt ResourceType, name string) bool {
	if z == nil {
		return false
	}
	if z.superUsers[principal] {
		return true
	}
	wildcardPrincipal := ""
	if kind, _, ok := strings.Cut(principal, ":"); ok {
		wildcardPrincipal = kind + ":*"
	}
	allowed, guarded := false, false
	for _, a := range z.byType[rt] {
		if !resourceMatches(a, name) {
			continue
		}
		guarded = true
		if (a.Principal != principal && a.Principal != wildcardPrincipal) || (a.Host != host && a.Host != Wildcard) {
			continue
		}
		switch {
		case a.Permission == PermissionDeny && (a.Operation == op || a.Operation == OpAll):
			return false
		case a.Permission == PermissionAllow && implies(a.Operation, op):
			allowed = true
		}
	}
	return allowed || (!guarded && z.allowIfNoACL)
}

// implies reports whether an ALLOW for granted permits op.
func implies(granted, op Operation) bool {
	switch {
	case granted == op, granted == OpAll:
		return true
	case op == OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case op == OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}
