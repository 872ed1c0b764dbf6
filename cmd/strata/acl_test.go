package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestACLAndUserUsage: malformed acl and user commands are usage errors
// (exit 2) before any broker is contacted.
func TestACLAndUserUsage(t *testing.T) {
	for _, args := range [][]string{
		{"acl"},
		{"acl", "create", "--topic", "t", "--operation", "read"},                               // no principal
		{"acl", "create", "--allow-principal", "User:a", "--operation", "read"},                // no resource
		{"acl", "create", "--allow-principal", "User:a", "--topic", "t"},                       // no operation
		{"acl", "create", "--allow-principal", "User:a", "--topic", "t", "--operation", "fly"}, // unknown operation
		{"acl", "delete", "--allow-principal", "User:a"},                                       // no resource
		{"user", "create"}, // no name
		{"user", "create", "bob", "--iterations", "10"},                              // too few iterations
		{"user", "create", "bob", "--mechanism", "MD5"},                              // unknown mechanism
		{"user", "create", "bob"},                                                    // no password on stdin
		{"acl", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "u"}, // no password file
	} {
		var out strings.Builder
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if code := run(context.Background(), c, args); code != 2 {
			t.Errorf("strata %s: exit %d, want 2\n%s", strings.Join(args, " "), code, out.String())
		}
	}
}

func TestReadPassword(t *testing.T) {
	if p, err := readPassword(strings.NewReader("s3cret\r\nignored\n"), ""); err != nil || p != "s3cret" {
		t.Fatalf("stdin: %q %v", p, err)
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := readPassword(strings.NewReader("stdin"), file); err != nil || p != "from-file" {
		t.Fatalf("file: %q %v", p, err)
	}
	if _, err := readPassword(strings.NewReader("\n"), ""); !errors.Is(err, errUsage) {
		t.Fatalf("empty password: %v", err)
	}
}

// TestACLFilterBuilder: list without flags matches everything; create
// keeps exactly the given principals, hosts and operations.
func TestACLFilterBuilder(t *testing.T) {
	fs := newFlagSetTo("acl", &strings.Builder{})
	f := newACLFlags(fs, &cli{}, "any")
	if _, err := parseArgs(fs, nil); err != nil {
		t.Fatal(err)
	}
	b, err := f.builder(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateDescribe(); err != nil || !b.HasAnyFilter() {
		t.Fatalf("an empty list filter: %v, any %v", err, b.HasAnyFilter())
	}
	fs = newFlagSetTo("acl", &strings.Builder{})
	f = newACLFlags(fs, &cli{}, "literal")
	if _, err := parseArgs(fs, []string{"--allow-principal", "User:a", "--topic", "t", "--operation", "read,write", "--host", "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if b, err = f.builder(false); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateCreate(); err != nil || b.HasAnyFilter() {
		t.Fatalf("create builder: %v, any %v", err, b.HasAnyFilter())
	}
}
