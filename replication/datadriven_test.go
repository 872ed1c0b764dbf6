package replication

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-log/strata/internal/testkit"
)

// The scripted tests follow etcd raft's testdata format, run by
// testkit.RunScripts. go test -run TestScripts -rewrite regenerates the
// expected output.

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// scriptCmd is one parsed command.
type scriptCmd struct {
	line int
	name string
	args map[string]string
}

func parseCommand(t *testing.T, c testkit.Command) scriptCmd {
	t.Helper()
	cmd := scriptCmd{line: c.Line, name: c.Name(), args: map[string]string{}}
	for _, f := range c.Args() {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("%s: argument %q is not key=value", c.Pos(), f)
		}
		cmd.args[k] = v
	}
	return cmd
}

// runScripts runs every testdata/*.txt through exec, one fresh env per file.
// A command without output prints "ok".
func runScripts(t *testing.T, exec func(t *testing.T, env *scriptEnv, cmd scriptCmd) string) {
	testkit.RunScripts(t, "testdata/*.txt", *rewrite, func(*testing.T) testkit.ScriptExec {
		env := &scriptEnv{}
		return func(t *testing.T, c testkit.Command) string {
			got := strings.TrimRight(exec(t, env, parseCommand(t, c)), "\n")
			if got == "" {
				got = "ok"
			}
			return got
		}
	})
}

func (c scriptCmd) int64Arg(t *testing.T, key string, def int64) int64 {
	t.Helper()
	v, ok := c.args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("line %d: %s=%q: %v", c.line, key, v, err)
	}
	return n
}

func (c scriptCmd) int32Arg(t *testing.T, key string, def int32) int32 {
	t.Helper()
	return int32(c.int64Arg(t, key, int64(def)))
}

// idsArg parses "1,2,3" (or "" for none).
func (c scriptCmd) idsArg(t *testing.T, key string) []int32 {
	t.Helper()
	v := c.args[key]
	if v == "" {
		return []int32{}
	}
	var out []int32
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			t.Fatalf("line %d: %s=%q: %v", c.line, key, v, err)
		}
		out = append(out, int32(n))
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("error: %v", err)
}
