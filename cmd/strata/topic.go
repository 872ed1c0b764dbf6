package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/metadata"
)

// runTopic dispatches `strata topic <verb>`; every verb talks to a broker
// through kadm.
func runTopic(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "topic", map[string]verb{
		"create":   {topicCreate, "create topics"},
		"list":     {topicList, "list topics with partitions, replication factor and id"},
		"describe": {topicDescribe, "show a topic's partitions, replicas and configs"},
		"alter":    {topicAlter, "set or remove topic config overrides"},
		"delete":   {topicDelete, "delete topics"},
	}, args)
}

// adminFlags registers the connection flags (brokers, SASL, TLS, profile)
// and returns a constructor of the admin client, to call after parsing.
func adminFlags(fs *flag.FlagSet, c *cli) func() (*kadm.Client, func(), error) {
	return newConnFlags(fs, c).admin
}

// clientFlags registers the connection flags and returns a function
// building the client of an admin command (raw requests; kadm wraps it).
func clientFlags(fs *flag.FlagSet, c *cli) func() (*kgo.Client, error) {
	conn := newConnFlags(fs, c)
	return func() (*kgo.Client, error) {
		cl, _, err := conn.client()
		return cl, err
	}
}

func topicCreate(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic create TOPIC...", c)
	admin := adminFlags(fs, c)
	partitions := fs.Int("partitions", -1, "partitions (-1: the broker's num.partitions)")
	replication := fs.Int("replication-factor", -1, "replicas per partition (-1: the broker's default)")
	var configs stringList
	fs.Var(&configs, "config", "topic config `key=value` (repeatable), e.g. retention.ms=3600000")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErrorf("topic create needs at least one topic name")
	}
	kv, err := parseKeyValues(configs)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	resps, err := adm.CreateTopics(ctx, int32(*partitions), int16(*replication), kv, names...)
	if err != nil {
		return err
	}
	return eachResult(c.stdout, resps.Sorted(), func(r kadm.CreateTopicResponse) (string, error) {
		return fmt.Sprintf("created %s (%d partitions, id %s)", r.Topic, r.NumPartitions, topicIDString(r.ID)), topicErr(r.Topic, r.Err, r.ErrMessage)
	})
}

// topicIDString is Kafka's form of a topic id (unpadded base64url, as
// Kafka's tools, the broker's logs and the bucket's keys show it), not
// kadm's padded standard base64.
func topicIDString(id kadm.TopicID) string { return metadata.TopicID(id).String() }

// topicErr is a topic's error with the broker's reason (its ErrorMessage,
// e.g. which config is invalid and why), naming the topic.
func topicErr(topic string, err error, msg string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", topic, withMessage(err, msg))
}

// eachResult prints one line per successful item and returns the first error.
func eachResult[T any](w io.Writer, items []T, line func(T) (string, error)) error {
	var first error
	for _, item := range items {
		msg, err := line(item)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		fmt.Fprintln(w, msg)
	}
	return first
}

func topicList(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic list", c)
	admin := adminFlags(fs, c)
	internal := fs.Bool("internal", false, "include internal topics")
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("topic list takes no arguments"))
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	list := adm.ListTopics
	if *internal {
		list = adm.ListTopicsWithInternal
	}
	topics, err := list(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS\tID")
	for _, t := range topics.Sorted() {
		if t.Err != nil {
			fmt.Fprintf(tw, "%s\terror: %v\t\t\n", t.Topic, t.Err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.Topic, len(t.Partitions), t.Partitions.NumReplicas(), topicIDString(t.ID))
	}
	return tw.Flush()
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func topicDelete(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic delete TOPIC...", c)
	admin := adminFlags(fs, c)
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErrorf("topic delete needs at least one topic name")
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	resps, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	return eachResult(c.stdout, resps.Sorted(), func(r kadm.DeleteTopicResponse) (string, error) {
		return "deleted " + r.Topic, topicErr(r.Topic, r.Err, r.ErrMessage)
	})
}

func topicAlter(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic alter TOPIC...", c)
	admin := adminFlags(fs, c)
	var sets, deletes stringList
	fs.Var(&sets, "set", "set config `key=value` (repeatable)")
	fs.Var(&deletes, "delete", "remove the topic's override of config `key` (repeatable)")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 || len(sets)+len(deletes) == 0 {
		return usageErrorf("topic alter needs a topic name and at least one --set or --delete")
	}
	var alters []kadm.AlterConfig
	kv, err := parseKeyValues(sets)
	if err != nil {
		return err
	}
	for k, v := range kv {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
	}
	for _, k := range deletes {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	resps, err := adm.AlterTopicConfigs(ctx, alters, names...)
	if err != nil {
		return err
	}
	return eachResult(c.stdout, resps, func(r kadm.AlterConfigsResponse) (string, error) {
		return "altered " + r.Name, topicErr(r.Name, r.Err, r.ErrMessage)
	})
}

func topicDescribe(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic describe TOPIC...", c)
	admin := adminFlags(fs, c)
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErrorf("topic describe needs at least one topic name")
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	for _, name := range names {
		if err := describeOne(ctx, c.stdout, adm, name); err != nil {
			return err
		}
	}
	return nil
}

// describeOne prints a topic's partitions (leader, replicas, ISR, start and
// end offsets) and its non-default configs.
func describeOne(ctx context.Context, w io.Writer, adm *kadm.Client, name string) error {
	topics, err := adm.ListTopics(ctx, name)
	if err != nil {
		return err
	}
	td, ok := topics[name]
	if !ok || td.Err != nil {
		return fmt.Errorf("topic %s: %w", name, firstErr(td.Err, fmt.Errorf("not found")))
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "topic %s  id %s  partitions %d\n", name, topicIDString(td.ID), len(td.Partitions))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND")
	for _, p := range td.Partitions.Sorted() {
		start, _ := starts.Lookup(name, p.Partition)
		end, _ := ends.Lookup(name, p.Partition)
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%v\t%v\t%d\t%d\n", p.Partition, p.Leader, p.LeaderEpoch,
			p.Replicas, p.ISR, start.Offset, end.Offset)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return describeConfigs(ctx, w, adm, name)
}

func describeConfigs(ctx context.Context, w io.Writer, adm *kadm.Client, name string) error {
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return err
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		return err
	}
	if rc.Err != nil {
		return fmt.Errorf("configs of %s: %w", name, withMessage(rc.Err, rc.ErrMessage))
	}
	sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
	fmt.Fprintln(w, "  configs:")
	for _, cfg := range rc.Configs {
		fmt.Fprintf(w, "    %s=%s (%s)\n", cfg.Key, cfg.MaybeValue(), strings.ToLower(cfg.Source.String()))
	}
	return nil
}
