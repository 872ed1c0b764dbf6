package auth

import (
	"fmt"
	"strings"
)

// Kafka's names of the ACL enums (as kafka-acls.sh and the Java enums
// spell them), for logs and the strata CLI.
var (
	resourceTypeNames = map[ResourceType]string{ResourceUnknown: "UNKNOWN", ResourceAny: "ANY",
		ResourceTopic: "TOPIC", ResourceGroup: "GROUP", ResourceCluster: "CLUSTER",
		ResourceTransactionalID: "TRANSACTIONAL_ID"}
	patternTypeNames = map[PatternType]string{PatternUnknown: "UNKNOWN", PatternAny: "ANY",
		PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED"}
	operationNames = map[Operation]string{OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ",
		OpWrite: "WRITE", OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE",
		OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS",
		OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE"}
	permissionNames = map[Permission]string{PermissionUnknown: "UNKNOWN", PermissionAny: "ANY",
		PermissionDeny: "DENY", PermissionAllow: "ALLOW"}
)

func (t ResourceType) String() string { return enumName(resourceTypeNames, t) }
func (t PatternType) String() string  { return enumName(patternTypeNames, t) }
func (o Operation) String() string    { return enumName(operationNames, o) }
func (p Permission) String() string   { return enumName(permissionNames, p) }

// ParseResourceType parses a name such as "topic" or "TRANSACTIONAL_ID"
// (case and '-'/'_' insensitive).
func ParseResourceType(s string) (ResourceType, error) { return parseEnum(resourceTypeNames, s) }

// ParsePatternType parses "literal", "prefixed", "match" or "any".
func ParsePatternType(s string) (PatternType, error) { return parseEnum(patternTypeNames, s) }

// ParseOperation parses an operation name such as "read" or
// "describe-configs".
func ParseOperation(s string) (Operation, error) { return parseEnum(operationNames, s) }

// ParsePermission parses "allow", "deny" or "any".
func ParsePermission(s string) (Permission, error) { return parseEnum(permissionNames, s) }

func enumName[T ~int8](names map[T]string, v T) string {
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(v))
}

func parseEnum[T ~int8](names map[T]string, s string) (T, error) {
	want := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	for v, n := range names {
		if n == want && n != "UNKNOWN" {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown name %q", ErrInvalidACL, s)
}
