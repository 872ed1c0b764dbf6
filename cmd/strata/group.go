package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runGroup dispatches `strata group <verb>`; every verb talks to a broker
// through kadm, describe also with raw ConsumerGroupDescribe requests, and
// list, describe and lag read the record at each committed offset with a
// consumer (group_lag.go). reset is in group_reset.go, delete and
// delete-offsets in group_delete.go, the --json of list and describe in
// group_json.go.
func runGroup(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "group", map[string]verb{
		"list":           {groupList, "list consumer groups with their state and retention margin, --json"},
		"describe":       {groupDescribe, "show groups' members, committed offsets, lag and retention margin, --json"},
		"reset":          {groupReset, "plan new committed offsets for an idle group; --execute commits them"},
		"lag":            {groupLag, "lag and time to loss of every group (or those named), --json"},
		"delete":         {groupDelete, "delete empty groups and their committed offsets"},
		"delete-offsets": {groupDeleteOffsets, "delete a group's committed offsets of some topics or partitions"},
	}, args)
}

// groupList lists groups with, per group, its most urgent retention margin
// (RETENTION, see groupLagHelp), computed for the listed groups only.
func groupList(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group list [STATE...]", c)
	open := groupClientFlags(fs, c)
	var types stringList
	fs.Var(&types, "type", "only groups of this type, classic or consumer (repeatable; default: all)")
	asJSON := jsonFlag(fs)
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
	if *asJSON {
		return printGroupListJSON(c.stdout, groups.Sorted(), margins)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR\tRETENTION")
	for _, g := range groups.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", g.Group, orDash(&g.GroupType), g.State, g.ProtocolType, g.Coordinator,
			marginOf(margins, g.Group).summary())
	}
	return tw.Flush()
}

// marginOf is group's margin in margins, unknown when missing.
func marginOf(margins map[string]retentionMargin, group string) retentionMargin {
	if m, ok := margins[group]; ok {
		return m
	}
	return retentionMargin{Kind: retentionUnknown}
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
	asJSON := jsonFlag(fs)
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
	if *asJSON {
		return printDescribeJSON(c.stdout, names, lags, rows, consumerGroups, namer)
	}
	for _, name := range names {
		l, err := describedGroup(lags, name)
		if err != nil {
			return err
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

// describedGroup is name's description in lags, or why there is none.
func describedGroup(lags kadm.DescribedGroupLags, name string) (kadm.DescribedGroupLag, error) {
	l, ok := lags[name]
	switch {
	case !ok:
		return l, fmt.Errorf("group %s: not described", name)
	case l.Error() != nil:
		return l, fmt.Errorf("group %s: %w", name, l.Error())
	case l.State == "Dead": // Kafka's answer for a group it does not know
		return l, fmt.Errorf("group %s does not exist", name)
	}
	return l, nil
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
