package e2e

// The --json forms of `strata user list`, `acl list` and `quota describe`
// against a SASL_SSL broker with the authorizer on: arrays of objects with
// the tables' fields, [] when there is nothing to list.

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestCLIJSONSecurityLists(t *testing.T) {
	env := newSecureEnv(t)
	b := StartBroker(t, withListeners(Listener{Name: "SASL_SSL", Protocol: "SASL_SSL"}),
		withArgs(append(env.saslArgs(), "--authorizer", "--super-users", "User:broker")...))
	admin := func(args ...string) []string {
		return append(args, "--brokers", b.Addr, "--tls-ca-file", env.files.CA, "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-username", "broker", "--sasl-password-file", env.passFile)
	}
	decode := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
	}

	// Empty lists are [], not null.
	for _, args := range [][]string{{"acl", "list", "--json"}, {"quota", "describe", "--json"}} {
		if out := strings.TrimSpace(runStrata(t, admin(args...)...)); out != "[]" {
			t.Errorf("strata %s with nothing to list: %q, want []", strings.Join(args, " "), out)
		}
	}

	runStrataInput(t, "bob-secret\n", admin("user", "create", "bob", "--mechanism", "SCRAM-SHA-512")...)
	type userRow struct {
		User       string `json:"user"`
		Mechanism  string `json:"mechanism"`
		Iterations int32  `json:"iterations"`
	}
	var users []userRow
	out := runStrata(t, admin("user", "list", "--json")...)
	decode(out, &users)
	i := slices.IndexFunc(users, func(u userRow) bool { return u.User == "bob" })
	if i < 0 || users[i].Mechanism != "SCRAM-SHA-512" || users[i].Iterations < 4096 || strings.Contains(out, "bob-secret") {
		t.Errorf("user list --json:\n%s", out)
	}

	runStrata(t, admin("acl", "create", "--allow-principal", "User:alice", "--operation", "write", "--topic", "json-events")...)
	var acls []map[string]string
	out = runStrata(t, admin("acl", "list", "--json")...)
	decode(out, &acls)
	want := map[string]string{"principal": "User:alice", "host": "*", "permission": "ALLOW", "operation": "WRITE",
		"resource": "TOPIC", "name": "json-events", "pattern": "LITERAL"}
	if len(acls) != 1 || !maps.Equal(acls[0], want) {
		t.Errorf("acl list --json: %v, want [%v]", acls, want)
	}

	runStrata(t, admin("quota", "set", "--user", "alice", "--producer-byte-rate", "1048576")...)
	runStrata(t, admin("quota", "set", "--default-client-id", "--consumer-byte-rate", "2048")...)
	var quotas []struct {
		Entity map[string]*string `json:"entity"`
		Quotas map[string]float64 `json:"quotas"`
	}
	out = runStrata(t, admin("quota", "describe", "--json")...)
	decode(out, &quotas)
	var sawUser, sawDefault bool
	for _, q := range quotas {
		if name, ok := q.Entity["user"]; ok && name != nil && *name == "alice" && q.Quotas["producer_byte_rate"] == 1048576 {
			sawUser = true
		}
		if name, ok := q.Entity["client-id"]; ok && name == nil && q.Quotas["consumer_byte_rate"] == 2048 {
			sawDefault = true
		}
	}
	if len(quotas) != 2 || !sawUser || !sawDefault {
		t.Errorf("quota describe --json:\n%s", out)
	}
}
