package main

import (
	"io"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/auth"
)

// The --json forms of `user list`, `acl list` and `quota describe`: one
// object per table row with the table's fields, [] when there is none.

// userJSON is one element of `user list --json`: one SCRAM credential.
type userJSON struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

// aclJSON is one element of `acl list --json`, in the words of the table
// (Kafka's names: "ALLOW", "READ", "TOPIC", "LITERAL").
type aclJSON struct {
	Principal  string `json:"principal"`
	Host       string `json:"host"`
	Permission string `json:"permission"`
	Operation  string `json:"operation"`
	Resource   string `json:"resource"`
	Name       string `json:"name"`
	Pattern    string `json:"pattern"`
}

// quotaJSON is one element of `quota describe --json`. Entity maps each
// entity type ("user", "client-id") to its name, null for the default of
// that type; Quotas maps each quota key to its value.
type quotaJSON struct {
	Entity map[string]*string `json:"entity"`
	Quotas map[string]float64 `json:"quotas"`
}

func printACLsJSON(w io.Writer, acls []kadm.DescribedACL) error {
	out := make([]aclJSON, 0, len(acls))
	for _, d := range acls {
		out = append(out, aclJSON{Principal: d.Principal, Host: d.Host, Permission: auth.Permission(d.Permission).String(),
			Operation: auth.Operation(d.Operation).String(), Resource: auth.ResourceType(d.Type).String(), Name: d.Name,
			Pattern: auth.PatternType(d.Pattern).String()})
	}
	return writeJSON(w, out)
}

func printQuotasJSON(w io.Writer, quotas kadm.DescribedClientQuotas) error {
	out := make([]quotaJSON, 0, len(quotas))
	for _, q := range quotas {
		j := quotaJSON{Entity: map[string]*string{}, Quotas: map[string]float64{}}
		for _, c := range q.Entity {
			j.Entity[c.Type] = c.Name
		}
		for _, v := range q.Values {
			j.Quotas[v.Key] = v.Value
		}
		out = append(out, j)
	}
	return writeJSON(w, out)
}
