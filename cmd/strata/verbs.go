package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// verb is one subcommand of a command group (`strata topic create`).
type verb struct {
	run     func(context.Context, *cli, []string) error
	summary string
}

// dispatchVerb runs `strata <group> <verb> [flags]`. `strata <group>`
// with -h, --help or help lists the verbs on stdout; no verb or an unknown
// one is a usage error that lists them on stderr.
func dispatchVerb(ctx context.Context, c *cli, group string, verbs map[string]verb, args []string) error {
	if len(args) > 0 && isHelp(args[0]) {
		printVerbs(c.stdout, group, verbs)
		return nil
	}
	if len(args) == 0 || verbs[args[0]].run == nil {
		printVerbs(c.stderr, group, verbs)
		if len(args) == 0 {
			return usageErrorf("want a subcommand")
		}
		return usageErrorf("unknown subcommand %q", args[0])
	}
	return verbs[args[0]].run(ctx, c, args[1:])
}

func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help", "help":
		return true
	}
	return false
}

func printVerbs(w io.Writer, group string, verbs map[string]verb) {
	names := make([]string, 0, len(verbs))
	for name := range verbs {
		names = append(names, name)
	}
	slices.Sort(names)
	width := 10
	for _, name := range names {
		width = max(width, len(name))
	}
	fmt.Fprintf(w, "usage: strata %s <subcommand> [flags]\n\nsubcommands:\n", group)
	for _, name := range names {
		fmt.Fprintf(w, "  %-*s %s\n", width, name, verbs[name].summary)
	}
	fmt.Fprintf(w, "\nRun 'strata %s <subcommand> -h' for its flags.\n", group)
}

// helpRouter is a flag set's output: the help -h asks for goes to stdout,
// errors about bad flags (and the usage after them) to stderr.
type helpRouter struct {
	stdout, stderr io.Writer
	help           bool // set by parseArgs when the arguments ask for help
}

func (r *helpRouter) Write(p []byte) (int, error) {
	if r.help {
		return r.stdout.Write(p)
	}
	return r.stderr.Write(p)
}

// asksForHelp reports whether args (flags before "--") ask for help.
func asksForHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) && strings.HasPrefix(a, "-") {
			return true
		}
	}
	return false
}
