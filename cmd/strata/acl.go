package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/auth"
)

// runACL dispatches `strata acl <verb>`: Kafka ACLs through kadm
// (CreateAcls, DescribeAcls, DeleteAcls), in kafka-acls.sh's terms.
func runACL(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "acl", map[string]verb{
		"create": {aclCreate, "add ACL entries (kafka-acls.sh --add)"},
		"list":   {aclList, "list the ACL entries that match a filter"},
		"delete": {aclDelete, "remove the ACL entries that match a filter"},
	}, args)
}

func clientTLS(caFile string) (kgo.Opt, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usageErrorf("--tls-ca-file %s: no PEM certificate", caFile)
		}
	}
	return kgo.DialTLSConfig(cfg), nil
}

func clientSASL(mech, user, passFile string) (kgo.Opt, error) {
	if user == "" || passFile == "" {
		return nil, usageErrorf("--sasl-mechanism needs --sasl-username and --sasl-password-file")
	}
	pass, err := readSecretFile(passFile)
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(mech) {
	case auth.MechPlain:
		return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()), nil
	case auth.MechScramSHA256:
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()), nil
	case auth.MechScramSHA512:
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), nil
	}
	return nil, usageErrorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
}

// readSecretFile returns the first line of a file (a password).
func readSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", usageErrorf("%s: empty first line", path)
	}
	return line, nil
}

// aclFlags are the flags that describe ACLs or ACL filters.
type aclFlags struct {
	allow, deny, hosts, operations stringList
	topics, groups, txnIDs         stringList
	cluster                        *bool
	pattern                        *string
	admin                          func() (*kadm.Client, func(), error)
}

func newACLFlags(fs *flag.FlagSet, c *cli, defaultPattern string) *aclFlags {
	f := &aclFlags{admin: adminFlags(fs, c)}
	fs.Var(&f.allow, "allow-principal", "`principal` (User:name, User:*) the ACLs allow (repeatable)")
	fs.Var(&f.deny, "deny-principal", "`principal` the ACLs deny (repeatable)")
	fs.Var(&f.hosts, "host", "client `ip` the ACLs apply to (repeatable; create: default *, list/delete: any)")
	fs.Var(&f.operations, "operation", "`operation`: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write (repeatable; list/delete: default any)")
	fs.Var(&f.topics, "topic", "topic `name` (repeatable)")
	fs.Var(&f.groups, "group", "consumer group `id` (repeatable)")
	fs.Var(&f.txnIDs, "transactional-id", "transactional `id` (repeatable)")
	f.cluster = fs.Bool("cluster", false, "the cluster resource")
	f.pattern = fs.String("resource-pattern-type", defaultPattern, "literal or prefixed (list/delete also: any, match)")
	return f
}

func (f *aclFlags) hasResource() bool {
	return len(f.topics)+len(f.groups)+len(f.txnIDs) > 0 || *f.cluster
}

// builder turns the flags into a kadm ACL builder. For a filter (list,
// delete), missing principals, hosts, operations and resources mean "any".
func (f *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	ops, err := parseOperations(f.operations, filter)
	if err != nil {
		return nil, err
	}
	pattern, err := auth.ParsePatternType(*f.pattern)
	if err != nil {
		return nil, usageErrorf("--resource-pattern-type: %v", err)
	}
	b := kadm.NewACLs().Operations(ops...).ResourcePatternType(kadm.ACLPattern(pattern))
	b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(*f.cluster)
	if filter && !f.hasResource() {
		b.AnyResource()
	}
	if !filter {
		b.MaybeAllow(f.allow...).MaybeDeny(f.deny...)
		if len(f.allow) > 0 {
			b.MaybeAllowHosts(f.hosts...)
		}
		if len(f.deny) > 0 {
			b.MaybeDenyHosts(f.hosts...)
		}
		return b, nil
	}
	if len(f.allow)+len(f.deny) == 0 {
		return b.Allow().Deny().AllowHosts(f.hosts...).DenyHosts(f.hosts...), nil
	}
	b.MaybeAllow(f.allow...).MaybeDeny(f.deny...)
	if len(f.allow) > 0 {
		b.AllowHosts(f.hosts...)
	}
	if len(f.deny) > 0 {
		b.DenyHosts(f.hosts...)
	}
	return b, nil
}

func parseOperations(names []string, filter bool) ([]kadm.ACLOperation, error) {
	if len(names) == 0 {
		if filter {
			return []kadm.ACLOperation{kmsg.ACLOperationAny}, nil
		}
		return nil, usageErrorf("give at least one --operation")
	}
	var ops []kadm.ACLOperation
	for _, n := range names {
		for _, item := range splitList(n) {
			op, err := auth.ParseOperation(item)
			if err != nil {
				return nil, usageErrorf("--operation: %v", err)
			}
			ops = append(ops, kadm.ACLOperation(op))
		}
	}
	return ops, nil
}

func aclCreate(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("acl create", c)
	f := newACLFlags(fs, c, "literal")
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("acl create takes no arguments"))
	}
	if len(f.allow)+len(f.deny) == 0 || !f.hasResource() {
		return usageErrorf("acl create needs --allow-principal or --deny-principal, and a resource (--topic, --group, --transactional-id or --cluster)")
	}
	b, err := f.builder(false)
	if err != nil {
		return err
	}
	adm, closeFn, err := f.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	results, err := adm.CreateACLs(ctx, b)
	if err != nil {
		return err
	}
	return eachResult(c.stdout, results, func(r kadm.CreateACLsResult) (string, error) {
		return "created " + aclLine(r.Permission, r.Principal, r.Host, r.Operation, r.Type, r.Name, r.Pattern), withMessage(r.Err, r.ErrMessage)
	})
}

func aclList(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("acl list", c)
	f := newACLFlags(fs, c, "any")
	asJSON := jsonFlag(fs)
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("acl list takes no arguments"))
	}
	b, err := f.builder(true)
	if err != nil {
		return err
	}
	adm, closeFn, err := f.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	results, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return err
	}
	var acls []kadm.DescribedACL
	seen := map[kadm.DescribedACL]bool{}
	for _, r := range results {
		if err := withMessage(r.Err, r.ErrMessage); err != nil {
			return err
		}
		for _, d := range r.Described {
			if !seen[d] {
				seen[d] = true
				acls = append(acls, d)
			}
		}
	}
	sort.Slice(acls, func(i, j int) bool { return describedKey(acls[i]) < describedKey(acls[j]) })
	if *asJSON {
		return printACLsJSON(c.stdout, acls)
	}
	return printACLs(c, acls)
}

// printACLs prints acls (sorted) as a table.
func printACLs(c *cli, acls []kadm.DescribedACL) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tPERMISSION\tOPERATION\tRESOURCE\tNAME\tPATTERN")
	for _, d := range acls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Principal, d.Host, auth.Permission(d.Permission),
			auth.Operation(d.Operation), auth.ResourceType(d.Type), d.Name, auth.PatternType(d.Pattern))
	}
	return tw.Flush()
}

func describedKey(d kadm.DescribedACL) string {
	return fmt.Sprintf("%d\x00%s\x00%d\x00%s\x00%s\x00%d\x00%d", d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission)
}

func aclDelete(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("acl delete", c)
	f := newACLFlags(fs, c, "literal")
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("acl delete takes no arguments"))
	}
	if !f.hasResource() {
		return usageErrorf("acl delete needs a resource (--topic, --group, --transactional-id or --cluster)")
	}
	b, err := f.builder(true)
	if err != nil {
		return err
	}
	adm, closeFn, err := f.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	results, err := adm.DeleteACLs(ctx, b)
	if err != nil {
		return err
	}
	var first error
	for _, r := range results {
		if err := withMessage(r.Err, r.ErrMessage); err != nil {
			first = firstErr(first, err)
			continue
		}
		for _, d := range r.Deleted {
			if err := withMessage(d.Err, d.ErrMessage); err != nil {
				first = firstErr(first, err)
				continue
			}
			fmt.Fprintln(c.stdout, "deleted "+aclLine(d.Permission, d.Principal, d.Host, d.Operation, d.Type, d.Name, d.Pattern))
		}
	}
	return first
}

// aclLine renders one ACL the way kafka-acls.sh talks about them.
func aclLine(perm kmsg.ACLPermissionType, principal, host string, op kadm.ACLOperation, typ kmsg.ACLResourceType,
	name string, pattern kadm.ACLPattern,
) string {
	return fmt.Sprintf("%s %s %s from %s on %s %q (%s)", auth.Permission(perm), principal, auth.Operation(op), host,
		auth.ResourceType(typ), name, auth.PatternType(pattern))
}

// withMessage adds the broker's message to an error code's error. With a
// message, the code's generic description is left out: the broker's
// reason says more, and kerr's description can mislead (INVALID_PARTITIONS
// reads "Number of partitions is below 1." whatever the cause).
func withMessage(err error, msg string) error {
	if err == nil || msg == "" {
		return err
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return fmt.Errorf("%s: %s%w", ke.Message, msg, silentWrap{err})
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// silentWrap keeps an error in the chain (errors.Is) without printing it.
type silentWrap struct{ err error }

func (silentWrap) Error() string   { return "" }
func (w silentWrap) Unwrap() error { return w.err }
