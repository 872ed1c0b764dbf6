package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Command is one command of a golden script.
type Command struct {
	Path string // the script file
	Line int    // 1-based line number of the command
	Text string // the command line as written, without surrounding space
}

// Pos is "path:line", for messages.
func (c Command) Pos() string { return fmt.Sprintf("%s:%d", c.Path, c.Line) }

// Name is the command's first word.
func (c Command) Name() string { return strings.Fields(c.Text)[0] }

// Args are the words after the name.
func (c Command) Args() []string { return strings.Fields(c.Text)[1:] }

// ScriptExec runs one command against a script's world and returns its
// output, one or more lines without blank ones ("" for none).
type ScriptExec func(t *testing.T, c Command) string

// RunScripts runs every file matching glob (usually "testdata/*.txt") as a
// subtest named after the file. newWorld is called once per file and
// returns the executor of that file's commands. Each command's output must
// equal the expected block; with rewrite set, the file is written back with
// the actual outputs instead, keeping comments and blank lines.
func RunScripts(t *testing.T, glob string, rewrite bool, newWorld func(t *testing.T) ScriptExec) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", glob, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			runScript(t, path, rewrite, newWorld(t))
		})
	}
}

// scriptBlock is one command with its expected output, and the comment and
// blank lines before it.
type scriptBlock struct {
	leading  string
	cmd      Command
	expected string
}

func runScript(t *testing.T, path string, rewrite bool, exec ScriptExec) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, trailing := parseScript(t, path, string(data))
	var rewritten strings.Builder
	for _, b := range blocks {
		got := exec(t, b.cmd)
		rewritten.WriteString(b.leading + b.cmd.Text + "\n----\n")
		if got != "" {
			rewritten.WriteString(got + "\n")
		}
		rewritten.WriteString("\n")
		if !rewrite && got != b.expected {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", b.cmd.Pos(), b.cmd.Text, got, b.expected)
		}
	}
	rewritten.WriteString(trailing)
	if rewrite {
		out := strings.TrimRight(rewritten.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// parseScript splits a script into command blocks and the comment text
// after the last one, keeping everything that is not expected output so the
// file can be rewritten.
func parseScript(t *testing.T, path, data string) (blocks []scriptBlock, trailing string) {
	t.Helper()
	lines := strings.Split(data, "\n")
	var leading strings.Builder
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			leading.WriteString(l + "\n")
			continue
		}
		cmd := Command{Path: path, Line: i + 1, Text: strings.TrimSpace(l)}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s: command without ---- separator", cmd.Pos())
		}
		// The expected output runs to the next blank line, which ends the
		// block and is written back after it.
		var out []string
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		blocks = append(blocks, scriptBlock{leading: leading.String(), cmd: cmd, expected: strings.Join(out, "\n")})
		leading.Reset()
	}
	return blocks, leading.String()
}
