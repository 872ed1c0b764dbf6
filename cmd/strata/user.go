package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/auth"
)

// runUser dispatches `strata user <verb>`: SCRAM credentials through kadm
// (AlterUserScramCredentials, DescribeUserScramCredentials). Passwords are
// read from --password-file or stdin, never from the command line (argv is
// visible to every user of the machine); kadm salts and hashes them here,
// so only the salted password crosses the wire and the broker stores the
// derived keys.
func runUser(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "user", map[string]verb{
		"create": {userCreate, "create or update a SCRAM user's credentials"},
		"delete": {userDelete, "delete a SCRAM user's credentials"},
		"list":   {userList, "list SCRAM users and their mechanisms"},
	}, args)
}

// scramMechanisms parses --mechanism: one SCRAM mechanism, or "all".
func scramMechanisms(s string) ([]kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "ALL":
		return []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}, nil
	case auth.MechScramSHA256:
		return []kadm.ScramMechanism{kadm.ScramSha256}, nil
	case auth.MechScramSHA512:
		return []kadm.ScramMechanism{kadm.ScramSha512}, nil
	}
	return nil, usageErrorf("--mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or all", s)
}

func userCreate(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("user create NAME", c)
	admin := adminFlags(fs, c)
	mech := fs.String("mechanism", "all", "SCRAM-SHA-256, SCRAM-SHA-512 or all")
	iterations := fs.Int("iterations", auth.DefaultIterations, fmt.Sprintf("PBKDF2 iterations (%d..%d)", auth.MinIterations, auth.MaxIterations))
	passFile := fs.String("password-file", "", "file whose first line is the password (default: the first line of stdin)")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 || names[0] == "" {
		return usageErrorf("user create needs exactly one user name")
	}
	mechs, err := scramMechanisms(*mech)
	if err != nil {
		return err
	}
	if *iterations < auth.MinIterations || *iterations > auth.MaxIterations {
		return usageErrorf("--iterations %d: want %d..%d", *iterations, auth.MinIterations, auth.MaxIterations)
	}
	password, err := readPassword(c.stdin, *passFile)
	if err != nil {
		return err
	}
	var upserts []kadm.UpsertSCRAM
	for _, m := range mechs {
		upserts = append(upserts, kadm.UpsertSCRAM{User: names[0], Mechanism: m, Iterations: int32(*iterations), Password: password})
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	return alterSCRAMs(ctx, c, adm, nil, upserts, "created")
}

// readPassword reads the first line of the file, or of stdin.
func readPassword(stdin io.Reader, file string) (string, error) {
	if file != "" {
		return readSecretFile(file)
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, auth.MaxMessageSize+2)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", usageErrorf("no password: give --password-file or write it to stdin")
	}
	return line, nil
}

func alterSCRAMs(ctx context.Context, c *cli, adm *kadm.Client, del []kadm.DeleteSCRAM, upserts []kadm.UpsertSCRAM, verb string) error {
	altered, err := adm.AlterUserSCRAMs(ctx, del, upserts)
	if err != nil {
		return err
	}
	return eachResult(c.stdout, altered.Sorted(), func(r kadm.AlteredUserSCRAM) (string, error) {
		return verb + " SCRAM credentials of " + r.User, withMessage(r.Err, r.ErrMessage)
	})
}

func userDelete(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("user delete NAME", c)
	admin := adminFlags(fs, c)
	mech := fs.String("mechanism", "all", "SCRAM-SHA-256, SCRAM-SHA-512 or all (every mechanism the user has)")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 || names[0] == "" {
		return usageErrorf("user delete needs exactly one user name")
	}
	mechs, err := scramMechanisms(*mech)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	if strings.EqualFold(*mech, "all") {
		if mechs, err = userMechanisms(ctx, adm, names[0]); err != nil {
			return err
		}
	}
	var del []kadm.DeleteSCRAM
	for _, m := range mechs {
		del = append(del, kadm.DeleteSCRAM{User: names[0], Mechanism: m})
	}
	return alterSCRAMs(ctx, c, adm, del, nil, "deleted")
}

// userMechanisms lists the mechanisms a user has credentials for.
func userMechanisms(ctx context.Context, adm *kadm.Client, user string) ([]kadm.ScramMechanism, error) {
	described, err := adm.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		return nil, err
	}
	d, ok := described[user]
	if !ok {
		return nil, fmt.Errorf("user %s: no answer", user)
	}
	if err := withMessage(d.Err, d.ErrMessage); err != nil {
		return nil, fmt.Errorf("user %s: %w", user, err)
	}
	var mechs []kadm.ScramMechanism
	for _, info := range d.CredInfos {
		mechs = append(mechs, info.Mechanism)
	}
	return mechs, nil
}

func userList(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("user list [NAME...]", c)
	admin := adminFlags(fs, c)
	asJSON := jsonFlag(fs)
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	described, err := adm.DescribeUserSCRAMs(ctx, names...)
	if err != nil {
		return err
	}
	users := []userJSON{}
	var first error
	for _, d := range described.Sorted() {
		if err := withMessage(d.Err, d.ErrMessage); err != nil {
			first = firstErr(first, fmt.Errorf("user %s: %w", d.User, err))
			continue
		}
		for _, info := range d.CredInfos {
			users = append(users, userJSON{User: d.User, Mechanism: info.Mechanism.String(), Iterations: info.Iterations})
		}
	}
	if *asJSON {
		return firstErr(writeJSON(c.stdout, users), first)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", u.User, u.Mechanism, u.Iterations)
	}
	return firstErr(tw.Flush(), first)
}
