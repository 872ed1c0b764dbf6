package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runGroup dispatches `strata group <verb>`; every verb talks to a broker
// through kadm, describe also with raw ConsumerGroupDescribe requests, and
// list, describe and lag read the record at each committed offset with a
// consumer (group_lag.go).
func runGroup(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "group", map[string]verb{
		"list":     {groupList, "list consumer groups with their state and retention margin"},
		"describe": {groupDescribe, "show groups' members, committed offsets, lag and retention margin"},
		"reset":    {groupReset, "move an idle group's committed offsets"},
		"lag":      {groupLag, "lag and time to loss of every group (or those named), --json"},
	}, args)
}

// groupList lists groups with, per group, its most urgent retention margin
// (RETENTION, see groupLagHelp), computed for the listed groups only.
func groupList(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group list [STATE...]", c)
	open := groupClientFlags(fs, c)
	var types stringList
	fs.Var(&types, "type", "only groups of this type, classic or consumer (repeatable; default: all)")
	states, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	for _, t := range types {
		if t != "classic" && t != "consumer" {
			return usageErrorf("--type %q: want classic or consumer", t)
		}
	}
	cl, adm, err := open()
	if err != nil {
		return err
	}
	defer cl.Close()
	groups, err := adm.ListGroupsByType(ctx, types, states...)
	if err != nil {
		return err
	}
	margins := groupMargins(ctx, c.stderr, cl, adm, groups.Groups())
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR\tRETENTION")
	for _, g := range groups.Sorted() {
		margin := retentionMargin{Kind: retentionUnknown}
		if m, ok := margins[g.Group]; ok {
			margin = m
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", g.Group, orDash(&g.GroupType), g.State, g.ProtocolType, g.Coordinator,
			margin.summary())
	}
	return tw.Flush()
}

// groupMargins is the most urgent retention margin of each of names, with
// one batch of requests for all of them (kadm.Lag, then gatherLag). A group
// that could not be described or fetched is missing (shown "?"); one with
// nothing committed has none ("-").
func groupMargins(ctx context.Context, warn io.Writer, cl *kgo.Client, adm *kadm.Client, names []string) map[string]retentionMargin {
	if len(names) == 0 {
		return nil // kadm.Lag with no names would describe every classic group
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		fmt.Fprintf(warn, "strata: retention margins unknown: %v\n", err)
		return nil
	}
	out := mostUrgent(gatherLag(ctx, warn, cl, adm, lags))
	for _, l := range lags {
		if _, ok := out[l.Group]; !ok && l.Error() == nil {
			out[l.Group] = retentionMargin{Kind: retentionNone}
		}
	}
	return out
}

// groupDescribe prints each group's lag table and, for a consumer-protocol
// group, its KIP-848 view (printConsumerProtocol).
func groupDescribe(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group describe GROUP...", c)
	open := groupClientFlags(fs, c)
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErrorf("group describe needs at least one group name")
	}
	cl, adm, err := open()
	if err != nil {
		return err
	}
	defer cl.Close()
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return err
	}
	consumerGroups, err := describeConsumerProtocol(ctx, cl, names)
	if err != nil {
		return err
	}
	rows := indexLagRows(gatherLag(ctx, c.stderr, cl, adm, lags))
	namer := &topicNamer{lookup: metadataTopicNames(ctx, adm)}
	for _, name := range names {
		l, ok := lags[name]
		if !ok {
			return fmt.Errorf("group %s: not described", name)
		}
		if err := l.Error(); err != nil {
			return fmt.Errorf("group %s: %w", name, err)
		}
		if l.State == "Dead" { // Kafka's answer for a group it does not know
			return fmt.Errorf("group %s does not exist", name)
		}
		if err := printGroupLag(c.stdout, l, rows); err != nil {
			return err
		}
		if g, ok := consumerGroups[name]; ok {
			if err := printConsumerProtocol(c.stdout, g, namer); err != nil {
				return err
			}
		}
	}
	return nil
}

// lagRowKey names one partition of one group.
type lagRowKey struct {
	group string
	topicPartition
}

func indexLagRows(rows []lagRow) map[lagRowKey]lagRow {
	out := make(map[lagRowKey]lagRow, len(rows))
	for _, r := range rows {
		out[lagRowKey{r.Group, topicPartition{r.Topic, r.Partition}}] = r
	}
	return out
}

// printGroupLag prints a group's state and, per partition, the committed
// offset, the end offset, the lag, the member it is assigned to and the
// retention margin from rows ("?" when rows lack the partition).
func printGroupLag(w io.Writer, l kadm.DescribedGroupLag, rows map[lagRowKey]lagRow) error {
	fmt.Fprintf(w, "group %s  state %s  protocol %s/%s  members %d  coordinator %d\n",
		l.Group, l.State, l.ProtocolType, l.Protocol, len(l.Members), l.Coordinator.NodeID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER\tCLIENT-ID\tHOST\tRETENTION")
	for _, p := range l.Lag.Sorted() {
		member, client, host := "-", "-", "-"
		if p.Member != nil {
			member, client, host = p.Member.MemberID, p.Member.ClientID, p.Member.ClientHost
		}
		committed := "-"
		if p.Commit.At >= 0 {
			committed = fmt.Sprint(p.Commit.At)
		}
		margin := retentionMargin{Kind: retentionUnknown}
		if r, ok := rows[lagRowKey{l.Group, topicPartition{p.Topic, p.Partition}}]; ok {
			margin = r.Margin
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, committed, p.End.Offset, p.Lag,
			member, client, host, margin)
	}
	return tw.Flush()
}

// resetTarget is where `group reset` moves a group's offsets.
type resetTarget struct {
	earliest, latest bool
	datetime         string
}

func (r resetTarget) validate() (time.Time, error) {
	n := 0
	for _, set := range []bool{r.earliest, r.latest, r.datetime != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return time.Time{}, usageErrorf("group reset needs exactly one of --to-earliest, --to-latest, --to-datetime")
	}
	if r.datetime == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339, r.datetime)
	if err != nil {
		return time.Time{}, usageErrorf("--to-datetime %q: want RFC 3339, e.g. 2026-11-29T10:00:00Z", r.datetime)
	}
	return at, nil
}

func groupReset(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group reset GROUP", c)
	admin := adminFlags(fs, c)
	var target resetTarget
	var topics stringList
	fs.BoolVar(&target.earliest, "to-earliest", false, "reset to each partition's log start offset")
	fs.BoolVar(&target.latest, "to-latest", false, "reset to each partition's end offset")
	fs.StringVar(&target.datetime, "to-datetime", "", "reset to the first offset at or after this RFC 3339 time")
	fs.Var(&topics, "topic", "topic to reset (repeatable; default: every topic the group has offsets for)")
	dryRun := fs.Bool("dry-run", false, "print the new offsets without committing them")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageErrorf("group reset needs exactly one group name")
	}
	at, err := target.validate()
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	group := names[0]
	if err := checkGroupEmpty(ctx, adm, group); err != nil {
		return err
	}
	if len(topics) == 0 {
		if topics, err = committedTopics(ctx, adm, group); err != nil {
			return err
		}
	}
	offsets, err := resetOffsets(ctx, adm, target, at, topics)
	if err != nil {
		return err
	}
	return commitReset(ctx, c.stdout, adm, group, offsets, *dryRun)
}

// checkGroupEmpty refuses to move the offsets of a group with live members
// (they would overwrite them with their next commit), as Kafka's
// kafka-consumer-groups --reset-offsets does, for classic and
// consumer-protocol groups alike. DescribeGroups describes both kinds; a
// consumer-protocol group's states are Empty, Assigning, Reconciling and
// Stable, and an unknown group is Dead.
func checkGroupEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d := described[group]
	if d.Err != nil {
		return fmt.Errorf("group %s: %w", group, d.Err)
	}
	if d.State != "Empty" && d.State != "Dead" || len(d.Members) > 0 {
		return fmt.Errorf("group %s has %d active members (state %s): stop its consumers first", group, len(d.Members), d.State)
	}
	return nil
}

func committedTopics(ctx context.Context, adm *kadm.Client, group string) ([]string, error) {
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	var topics []string
	for t := range offsets {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	if len(topics) == 0 {
		return nil, fmt.Errorf("group %s has no committed offsets: name the topics with --topic", group)
	}
	return topics, nil
}

// resetOffsets lists the target offset of every partition of topics.
func resetOffsets(ctx context.Context, adm *kadm.Client, target resetTarget, at time.Time, topics []string) (kadm.Offsets, error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	listed := ends
	switch {
	case target.earliest:
		listed, err = adm.ListStartOffsets(ctx, topics...)
	case target.datetime != "":
		listed, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topics...)
	}
	if err != nil {
		return nil, err
	}
	if err := errors.Join(listed.Error(), ends.Error()); err != nil {
		return nil, err
	}
	out := kadm.Offsets{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Offset < 0 { // no record at or after the time: the end
			end, _ := ends.Lookup(o.Topic, o.Partition)
			o.Offset = end.Offset
		}
		out.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	return out, nil
}

func commitReset(ctx context.Context, w io.Writer, adm *kadm.Client, group string, offsets kadm.Offsets, dryRun bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tNEW-OFFSET")
	var sorted []kadm.Offset
	offsets.Each(func(o kadm.Offset) { sorted = append(sorted, o) })
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Topic != sorted[j].Topic {
			return sorted[i].Topic < sorted[j].Topic
		}
		return sorted[i].Partition < sorted[j].Partition
	})
	for _, o := range sorted {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.At)
	}
	if err := tw.Flush(); err != nil || dryRun {
		return err
	}
	resps, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil {
		return err
	}
	if err := resps.Error(); err != nil {
		return fmt.Errorf("committing offsets of %s: %w", group, err)
	}
	fmt.Fprintf(w, "reset %d partitions of group %s\n", len(sorted), group)
	return nil
}
