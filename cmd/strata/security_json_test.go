package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSecurityListsJSON: the --json forms carry the table's fields in
// Kafka's words, and print [] rather than null when empty.
func TestSecurityListsJSON(t *testing.T) {
	var out strings.Builder
	if err := printACLsJSON(&out, nil); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("no ACLs: %q %v", out.String(), err)
	}
	out.Reset()
	if err := printQuotasJSON(&out, nil); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("no quotas: %q %v", out.String(), err)
	}
	out.Reset()
	acl := kadm.DescribedACL{Principal: "User:alice", Host: "*", Name: "orders", Type: 2, Pattern: 3, Operation: 3, Permission: 3}
	if err := printACLsJSON(&out, []kadm.DescribedACL{acl}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"principal": "User:alice"`, `"permission": "ALLOW"`, `"operation": "READ"`,
		`"resource": "TOPIC"`, `"name": "orders"`, `"pattern": "LITERAL"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("acl JSON lacks %s:\n%s", want, out.String())
		}
	}
	out.Reset()
	alice := "alice"
	quotas := kadm.DescribedClientQuotas{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id"}},
		Values: kadm.ClientQuotaValues{{Key: "producer_byte_rate", Value: 1048576}},
	}}
	if err := printQuotasJSON(&out, quotas); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"user": "alice"`, `"client-id": null`, `"producer_byte_rate": 1048576`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("quota JSON lacks %s:\n%s", want, out.String())
		}
	}
}
