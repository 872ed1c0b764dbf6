package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestQuotaCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"set", "--producer-byte-rate", "100"}, // no entity
		{"set", "--client-id", "c"},            // nothing to set
		{"set", "--user", "a", "--default-user", "--producer-byte-rate", "1"}, // name and default
		{"describe", "--client-id", "c", "--default-client-id"},               // name and default
	} {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if err := runQuota(context.Background(), c, args); !errors.Is(err, errUsage) {
			t.Errorf("quota %v: %v, want a usage error", args, err)
		}
	}
}

func TestQuotaEntityAndOps(t *testing.T) {
	f := quotaEntityFlags{user: "alice", defaultClientID: true}
	e := f.entity()
	if len(e) != 2 || e[0].Type != "user" || *e[0].Name != "alice" || e[1].Type != "client-id" || e[1].Name != nil {
		t.Fatalf("entity %v", e)
	}
	rate, none := 1024.0, -1.0
	ops, err := quotaSetOps(map[string]*float64{"producer_byte_rate": &rate, "consumer_byte_rate": &none}, []string{"request_percentage"})
	if err != nil || len(ops) != 2 || ops[0].Key != "producer_byte_rate" || ops[0].Value != 1024 ||
		!ops[1].Remove || !strings.HasPrefix(ops[1].Key, "request") {
		t.Fatalf("ops %+v %v", ops, err)
	}
}
