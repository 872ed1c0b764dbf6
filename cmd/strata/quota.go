package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

// runQuota dispatches `strata quota set|describe`: Kafka client quotas
// (producer_byte_rate, consumer_byte_rate, request_percentage) per user
// and/or client id, through AlterClientQuotas / DescribeClientQuotas.
func runQuota(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "quota", map[string]verb{
		"set":      {quotaSet, "set or remove client quotas of a user and/or client id"},
		"describe": {quotaDescribe, "show client quotas"},
	}, args)
}

// quotaEntityFlags are the entity selectors both verbs take.
type quotaEntityFlags struct {
	user, clientID               string
	defaultUser, defaultClientID bool
}

func (f *quotaEntityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.user, "user", "", "user `name` (the principal without \"User:\")")
	fs.StringVar(&f.clientID, "client-id", "", "client `id`")
	fs.BoolVar(&f.defaultUser, "default-user", false, "the default of all users")
	fs.BoolVar(&f.defaultClientID, "default-client-id", false, "the default of all client ids")
}

func (f *quotaEntityFlags) validate() error {
	if f.user != "" && f.defaultUser || f.clientID != "" && f.defaultClientID {
		return usageErrorf("give a name or the default of an entity type, not both")
	}
	return nil
}

// entity is the kadm entity of the flags (a nil name is the default).
func (f *quotaEntityFlags) entity() kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	if f.user != "" || f.defaultUser {
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "user", Name: namePtr(f.user, f.defaultUser)})
	}
	if f.clientID != "" || f.defaultClientID {
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: namePtr(f.clientID, f.defaultClientID)})
	}
	return e
}

func namePtr(name string, isDefault bool) *string {
	if isDefault {
		return nil
	}
	return &name
}

// quotaSetOps turns the value flags and --remove into ops (a negative
// value flag means "not given").
func quotaSetOps(values map[string]*float64, remove []string) ([]kadm.AlterClientQuotaOp, error) {
	var ops []kadm.AlterClientQuotaOp
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := *values[k]; v >= 0 {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
		}
	}
	for _, k := range remove {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if len(ops) == 0 {
		return nil, usageErrorf("nothing to set: give --producer-byte-rate, --consumer-byte-rate, --request-percentage or --remove")
	}
	return ops, nil
}

func quotaSet(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("quota set", c)
	admin := adminFlags(fs, c)
	var ent quotaEntityFlags
	ent.register(fs)
	values := map[string]*float64{
		"producer_byte_rate": fs.Float64("producer-byte-rate", -1, "produce `bytes/s` (producer_byte_rate)"),
		"consumer_byte_rate": fs.Float64("consumer-byte-rate", -1, "fetch `bytes/s` (consumer_byte_rate)"),
		"request_percentage": fs.Float64("request-percentage", -1, "`percent` of one request thread (request_percentage)"),
	}
	var remove stringList
	fs.Var(&remove, "remove", "quota `name` to remove (repeatable), e.g. producer_byte_rate")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := ent.validate(); err != nil {
		return err
	}
	if len(ent.entity()) == 0 {
		return usageErrorf("quota set needs --user, --client-id, --default-user or --default-client-id")
	}
	ops, err := quotaSetOps(values, remove)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent.entity(), Ops: ops}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Entity, withMessage(r.Err, r.ErrMessage)))
			continue
		}
		fmt.Fprintf(c.stdout, "altered quotas of %s\n", r.Entity)
	}
	return errors.Join(errs...)
}

func quotaDescribe(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("quota describe", c)
	admin := adminFlags(fs, c)
	var ent quotaEntityFlags
	ent.register(fs)
	strict := fs.Bool("strict", false, "only entities with exactly the given entity types")
	asJSON := jsonFlag(fs)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := ent.validate(); err != nil {
		return err
	}
	var filter []kadm.DescribeClientQuotaComponent
	for _, comp := range ent.entity() {
		f := kadm.DescribeClientQuotaComponent{Type: comp.Type, MatchName: comp.Name, MatchType: 0}
		if comp.Name == nil {
			f.MatchType = 1
		}
		filter = append(filter, f)
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	quotas, err := adm.DescribeClientQuotas(ctx, *strict, filter)
	if err != nil {
		return err
	}
	if *asJSON {
		return printQuotasJSON(c.stdout, quotas)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY\tQUOTAS")
	for _, q := range quotas {
		vals := make([]string, 0, len(q.Values))
		for _, v := range q.Values {
			// Rates print as the integers they were set to (1048576,
			// not %v's 1.048576e+06), fractions as the shortest exact form.
			vals = append(vals, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
		fmt.Fprintf(tw, "%s\t%s\n", q.Entity, strings.Join(vals, ","))
	}
	return tw.Flush()
}
