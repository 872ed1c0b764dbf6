// Command strata is Strata's one binary: the broker (`strata serve`), the
// admin and client commands, and the benchmark. It is thin on purpose: it
// parses flags into each package's Config and wires logging, metrics and
// signals; everything else lives in the packages (DESIGN.md §2, §11).
//
// Exit codes: 0 success, 1 runtime failure, 2 usage error or a command that
// is not available yet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"syscall"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

// cli carries the process's streams and environment so commands and tests
// do not touch os.* directly.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// conn is the connection the command resolved (nil before, or for a
	// command that connects to no broker), so run can explain a failure
	// to connect in terms of the settings that caused it.
	conn *connSummary
}

// command runs one subcommand with the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

// errUsage marks errors that exit with status 2 (errors.Is); only their
// message is printed.
var errUsage = errors.New("usage")

type usageError struct{ error }

func (usageError) Is(target error) bool { return target == errUsage }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func commands() map[string]command {
	return map[string]command{
		"serve":     {"run a broker", runServe},
		"topic":     {"create|list|describe|alter|add-partitions|delete topics", runTopic},
		"produce":   {"write stdin lines as records", runProduce},
		"consume":   {"print record values", runConsume},
		"bench":     {"produce|consume benchmarks", runBench},
		"version":   {"print the version", runVersion},
		"group":     {"list|describe|lag|reset|delete|delete-offsets consumer groups", runGroup},
		"quota":     {"set|describe client quotas", runQuota},
		"tier":      {"tiered storage status", runTier},
		"replay":    {"print a range of a topic from the bucket, no broker needed", runReplay},
		"restore":   {"restore topics, configs and group offsets from the bucket into a running cluster", runRestore},
		"acl":       {"create|list|delete Kafka ACLs", runACL},
		"user":      {"create|delete|list SCRAM users", runUser},
		"cluster":   {"cluster info (brokers, features, health) and broker configs", runCluster},
		"txn":       {"list|describe transactions and their producers", runTxn},
		"partition": {"reassign partitions and list ongoing reassignments", runPartition},
		"broker":    {"drain a broker of its replicas before stopping it", runBroker},
	}
}

func main() {
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, c, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and maps its error to an exit code.
func run(ctx context.Context, c *cli, args []string) int {
	cmds := commands()
	if len(args) == 0 {
		printUsage(c.stderr, cmds)
		return 2
	}
	if isHelp(args[0]) { // asked for: to stdout
		printUsage(c.stdout, cmds)
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(c.stderr, "strata: unknown command %q\n", args[0])
		printUsage(c.stderr, cmds)
		return 2
	}
	err := cmd.run(ctx, c, args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(c.stderr, "strata %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(c.stderr, "strata %s: %v\n", args[0], explainConnError(err, c.conn))
		return 1
	}
}

func printUsage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: strata <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-9s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'strata <command> -h' for a command's flags.")
}

func runVersion(_ context.Context, c *cli, args []string) error {
	if len(args) > 0 {
		return usageErrorf("version takes no arguments")
	}
	revision := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	fmt.Fprintf(c.stdout, "strata %s (commit %s, %s %s/%s)\n", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
