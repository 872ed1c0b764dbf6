package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Help that is asked for goes to stdout with exit 0; mistakes go to stderr
// with exit 2.
func TestHelpGoesToStdout(t *testing.T) {
	cases := []struct {
		args         []string
		code         int
		stdout       []string // each must appear on stdout
		stderrPrefix string   // stderr must contain it ("" : stderr empty)
	}{
		{[]string{"-h"}, 0, []string{"commands:", "topic"}, ""},
		{[]string{"topic", "-h"}, 0, []string{"subcommands:", "create", "describe", "delete"}, ""},
		{[]string{"group", "--help"}, 0, []string{"lag", "reset", "delete-offsets"}, ""},
		{[]string{"cluster", "-h"}, 0, []string{"info", "config"}, ""},
		{[]string{"txn", "-h"}, 0, []string{"list", "describe"}, ""},
		{[]string{"topic", "add-partitions", "-h"}, 0, []string{"-partitions"}, ""},
		{[]string{"cluster", "config", "bogus"}, 2, nil, `unknown action "bogus"`},
		{[]string{"topic", "add-partitions", "t"}, 2, nil, "--partitions N"},
		{[]string{"topic", "create", "-h"}, 0, []string{"-partitions", "-config"}, ""},
		{[]string{"consume", "--help"}, 0, []string{"-from-beginning"}, ""},
		{[]string{"topic", "create", "--bogus"}, 2, nil, "flag provided but not defined"},
		{[]string{"topic", "nope"}, 2, nil, `unknown subcommand "nope"`},
	}
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		code := run(context.Background(), c, tc.args)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\nstdout %q\nstderr %q", tc.args, code, tc.code, stdout.String(), stderr.String())
			continue
		}
		for _, want := range tc.stdout {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%v: stdout %q lacks %q", tc.args, stdout.String(), want)
			}
		}
		switch {
		case tc.stderrPrefix == "" && stderr.Len() > 0:
			t.Errorf("%v: stderr %q, want nothing", tc.args, stderr.String())
		case tc.stderrPrefix != "" && !strings.Contains(stderr.String(), tc.stderrPrefix):
			t.Errorf("%v: stderr %q lacks %q", tc.args, stderr.String(), tc.stderrPrefix)
		case tc.code != 0 && stdout.Len() > 0:
			t.Errorf("%v: a mistake printed %q on stdout", tc.args, stdout.String())
		}
	}
}
