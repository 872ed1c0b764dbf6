package replication

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The scripted tests follow etcd raft's testdata format:
//
//	# comment
//	command key=value key=v1,v2
//	----
//	expected output, one or more lines
//	<blank line>
//
// go test -run TestScripts -rewrite regenerates the expected output.

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// scriptCmd is one parsed command.
type scriptCmd struct {
	rawLine string
	line    int
	name    string
	args    map[string]string
}

type scriptBlock struct {
	cmd      scriptCmd
	expected string
}

// parseScript splits a script into comment text and command blocks. The
// returned parts keep everything that is not expected output, so the file
// can be rewritten.
func parseScript(t *testing.T, path string, data string) (blocks []scriptBlock, leading []string) {
	t.Helper()
	lines := strings.Split(data, "\n")
	var prefix strings.Builder
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			prefix.WriteString(l + "\n")
			continue
		}
		cmd := parseCommand(t, path, i+1, l)
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ---- separator", path, i+1)
		}
		i += 2
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		leading = append(leading, prefix.String())
		prefix.Reset()
		blocks = append(blocks, scriptBlock{cmd: cmd, expected: strings.Join(out, "\n")})
	}
	leading = append(leading, prefix.String())
	return blocks, leading
}

func parseCommand(t *testing.T, path string, line int, l string) scriptCmd {
	t.Helper()
	fields := strings.Fields(l)
	cmd := scriptCmd{rawLine: strings.TrimSpace(l), line: line, name: fields[0], args: map[string]string{}}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("%s:%d: argument %q is not key=value", path, line, f)
		}
		cmd.args[k] = v
	}
	return cmd
}

// runScripts runs every testdata/*.txt through exec, one fresh env per file.
func runScripts(t *testing.T, exec func(t *testing.T, env *scriptEnv, cmd scriptCmd) string) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			blocks, leading := parseScript(t, path, string(data))
			env := &scriptEnv{}
			var rewritten strings.Builder
			for i, b := range blocks {
				got := strings.TrimRight(exec(t, env, b.cmd), "\n")
				if got == "" {
					got = "ok"
				}
				rewritten.WriteString(leading[i] + b.cmd.raw() + "\n----\n" + got + "\n\n")
				if !*rewrite && got != b.expected {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, b.cmd.line, b.cmd.raw(), got, b.expected)
				}
			}
			rewritten.WriteString(leading[len(blocks)])
			if *rewrite {
				out := strings.TrimRight(rewritten.String(), "\n") + "\n"
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// raw is the command line as written.
func (c scriptCmd) raw() string { return c.rawLine }

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
