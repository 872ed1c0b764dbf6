package main

import (
	"errors"
	"flag"
	"io"
	"strings"
)

const defaultBrokers = "127.0.0.1:9092"

// newFlagSet returns a command's flag set, which reports errors instead
// of exiting: the help -h asks for goes to stdout, errors to stderr.
func newFlagSet(name string, c *cli) *flag.FlagSet {
	return newFlagSetTo(name, &helpRouter{stdout: c.stdout, stderr: c.stderr})
}

// newFlagSetTo is newFlagSet writing everything to out.
func newFlagSetTo(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

// parseArgs parses flags that may come before, between or after positional
// arguments ("topic create orders --partitions 3"), which the standard
// flag package alone stops at. It returns the positional arguments.
// A bare "--" ends flag parsing.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	if r, ok := fs.Output().(*helpRouter); ok {
		r.help = asksForHelp(args)
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErrorf("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// stringList is a repeatable string flag (--config k=v --config k2=v2).
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseKeyValues turns ["k=v", ...] into a map; values may be empty.
func parseKeyValues(items []string) (map[string]*string, error) {
	out := make(map[string]*string, len(items))
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return nil, usageErrorf("config %q: want key=value", item)
		}
		out[k] = &v
	}
	return out, nil
}
