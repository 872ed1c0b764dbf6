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
	"github.com/twmb/franz-go/pkg/kmsg"

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

		"add-partitions": {topicAddPartitions, "raise topics' partition count to a new total"},
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
	asJSON := jsonFlag(fs)
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
	rows := make([]listedTopic, 0, len(topics))
	for _, t := range topics.Sorted() {
		rows = append(rows, newListedTopic(t))
	}
	if *asJSON {
		return writeJSON(c.stdout, rows)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS\tID")
	for _, t := range rows {
		if t.Error != "" {
			fmt.Fprintf(tw, "%s\terror: %s\t\t\n", t.Topic, t.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.Topic, t.Partitions, t.ReplicationFactor, t.ID)
	}
	return tw.Flush()
}

// listedTopic is one row of `topic list`, the table's and the JSON's.
type listedTopic struct {
	Topic             string `json:"topic"`
	ID                string `json:"id,omitempty"`
	Internal          bool   `json:"internal"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Error             string `json:"error,omitempty"` // the topic could not be listed; the counts are 0
}

func newListedTopic(t kadm.TopicDetail) listedTopic {
	if t.Err != nil {
		return listedTopic{Topic: t.Topic, Internal: t.IsInternal, Error: t.Err.Error()}
	}
	return listedTopic{Topic: t.Topic, ID: topicIDString(t.ID), Internal: t.IsInternal,
		Partitions: len(t.Partitions), ReplicationFactor: t.Partitions.NumReplicas()}
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

// topicAddPartitions raises each topic's partition count to a total, as
// kafka-topics --alter --partitions does. The broker refuses a total that
// is not larger than the current count (Kafka never removes partitions: keys
// would move to other partitions); its reason is printed.
func topicAddPartitions(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic add-partitions TOPIC... --partitions N", c)
	admin := adminFlags(fs, c)
	total := fs.Int("partitions", 0, "the new total `count` of partitions (larger than the current one)")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 || *total <= 0 {
		return usageErrorf("topic add-partitions needs a topic name and --partitions N (the new total, N > 0)")
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	resps, err := adm.UpdatePartitions(ctx, *total, names...)
	if err != nil {
		return err
	}
	return eachResult(c.stdout, resps.Sorted(), func(r kadm.CreatePartitionsResponse) (string, error) {
		return fmt.Sprintf("%s now has %d partitions", r.Topic, *total), topicErr(r.Topic, r.Err, r.ErrMessage)
	})
}

func topicDescribe(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("topic describe TOPIC...", c)
	admin := adminFlags(fs, c)
	asJSON := jsonFlag(fs)
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
	described := make([]describedTopic, 0, len(names))
	for _, name := range names {
		d, err := describeTopic(ctx, adm, name)
		if err != nil {
			return err
		}
		if !*asJSON {
			printDescribedTopic(c.stdout, d)
		}
		described = append(described, d)
	}
	if *asJSON {
		return writeJSON(c.stdout, described)
	}
	return nil
}

// describedTopic is what `topic describe` shows of one topic.
type describedTopic struct {
	Topic      string               `json:"topic"`
	ID         string               `json:"id"`
	Internal   bool                 `json:"internal"`
	Partitions []describedPartition `json:"partitions"`
	Configs    []describedConfig    `json:"configs"`
}

// describedPartition is one partition's placement and offsets; an offset
// the broker could not list is -1.
type describedPartition struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"` // -1: offline
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	// Adding and Removing are set while the partition is being
	// reassigned (ListPartitionReassignments).
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// describedConfig is one config of a topic or a broker with where its
// value comes from.
type describedConfig struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"` // null when sensitive
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
	// Synonyms are the other levels that set it, highest precedence first
	// (e.g. a broker's dynamic value over the cluster-wide one).
	Synonyms []configSynonym `json:"synonyms,omitempty"`
}

type configSynonym struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

// describeTopic gathers a topic's partitions (leader, replicas, ISR, start
// and end offsets) and its configs.
func describeTopic(ctx context.Context, adm *kadm.Client, name string) (describedTopic, error) {
	topics, err := adm.ListTopics(ctx, name)
	if err != nil {
		return describedTopic{}, err
	}
	td, ok := topics[name]
	if !ok || td.Err != nil {
		return describedTopic{}, fmt.Errorf("topic %s: %w", name, firstErr(td.Err, fmt.Errorf("not found")))
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return describedTopic{}, err
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		return describedTopic{}, err
	}
	// Moves are shown when the brokers can list them; an older or
	// restricted cluster just shows none.
	asked := kadm.TopicsSet{}
	for _, p := range td.Partitions {
		asked.Add(name, p.Partition)
	}
	moving, _ := adm.ListPartitionReassignments(ctx, asked)
	d := describedTopic{Topic: name, ID: topicIDString(td.ID), Internal: td.IsInternal, Partitions: []describedPartition{}}
	for _, p := range td.Partitions.Sorted() {
		dp := describedPartition{Partition: p.Partition, Leader: p.Leader,
			LeaderEpoch: p.LeaderEpoch, Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR),
			StartOffset: offsetOrNone(starts, name, p.Partition), EndOffset: offsetOrNone(ends, name, p.Partition)}
		if m, ok := moving[name][p.Partition]; ok {
			dp.Adding, dp.Removing = m.AddingReplicas, m.RemovingReplicas
		}
		d.Partitions = append(d.Partitions, dp)
	}
	d.Configs, err = topicConfigs(ctx, adm, name)
	return d, err
}

// offsetOrNone is a partition's listed offset, or -1 if the broker did not
// list it.
func offsetOrNone(offsets kadm.ListedOffsets, topic string, partition int32) int64 {
	o, ok := offsets.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return -1
	}
	return o.Offset
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func printDescribedTopic(w io.Writer, d describedTopic) {
	fmt.Fprintf(w, "topic %s  id %s  partitions %d\n", d.Topic, d.ID, len(d.Partitions))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND\tMOVING")
	for _, p := range d.Partitions {
		moving := "-"
		if len(p.Adding)+len(p.Removing) > 0 {
			moving = fmt.Sprintf("adding %v removing %v", nonNil(p.Adding), nonNil(p.Removing))
		}
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%v\t%v\t%d\t%d\t%s\n", p.Partition, p.Leader, p.LeaderEpoch,
			p.Replicas, p.ISR, p.StartOffset, p.EndOffset, moving)
	}
	tw.Flush()
	fmt.Fprintln(w, "  configs:")
	for _, cfg := range d.Configs {
		fmt.Fprintf(w, "    %s=%s (%s)\n", cfg.Name, derefOr(cfg.Value, ""), cfg.Source)
	}
}

func derefOr(s *string, or string) string {
	if s == nil {
		return or
	}
	return *s
}

func topicConfigs(ctx context.Context, adm *kadm.Client, name string) ([]describedConfig, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return nil, err
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		return nil, err
	}
	if rc.Err != nil {
		return nil, fmt.Errorf("configs of %s: %w", name, withMessage(rc.Err, rc.ErrMessage))
	}
	return newDescribedConfigs(rc.Configs), nil
}

// newDescribedConfigs sorts configs by name; a synonym that repeats the
// config's own level is left out.
func newDescribedConfigs(configs []kadm.Config) []describedConfig {
	sort.Slice(configs, func(i, j int) bool { return configs[i].Key < configs[j].Key })
	out := make([]describedConfig, 0, len(configs))
	for _, cfg := range configs {
		d := describedConfig{Name: cfg.Key, Value: cfg.Value, Source: configSource(cfg.Source), Sensitive: cfg.Sensitive}
		for _, syn := range cfg.Synonyms {
			if syn.Key == cfg.Key && syn.Source == cfg.Source {
				continue
			}
			d.Synonyms = append(d.Synonyms, configSynonym{Name: syn.Key, Value: syn.Value, Source: configSource(syn.Source)})
		}
		out = append(out, d)
	}
	return out
}

// configSource is Kafka's name of a config source in lower case
// (dynamic_broker_config, static_broker_config, default_config, ...).
func configSource(s kmsg.ConfigSource) string { return strings.ToLower(s.String()) }
