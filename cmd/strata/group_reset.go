package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// `strata group reset` moves an idle group's committed offsets the way
// kafka-consumer-groups --reset-offsets does: by default it only prints the
// plan; --execute commits it. The plan is pure (planReset) over what the
// brokers report of each selected partition: the committed offset, the log
// start, the high watermark and, for a time target, the first offset at or
// after the time. Every new offset lies in [log start, high watermark], as
// Kafka clamps it: a consumer told to start outside the log would fall back
// to its auto.offset.reset, which is not what the operator planned.

const groupResetHelp = `usage: strata group reset GROUP TARGET [--topic T[:P,...]... | --all-topics] [--execute] [--json]

Plans new committed offsets for GROUP and prints, per partition, the
committed offset now (CURRENT-OFFSET, - when none) and the one planned
(NEW-OFFSET), beside the partition's log start and end (high watermark).
Nothing changes unless --execute is given; then the group must be empty
(no active members: they would overwrite the offsets with their next
commit) and the plan is committed.

TARGET is exactly one of:
  --to-earliest        the log start offset
  --to-latest          the end offset (high watermark)
  --to-offset N        offset N
  --shift-by N         the committed offset plus N (negative moves back);
                       every partition needs a committed offset
  --to-datetime T      the first offset at or after RFC 3339 time T
  --by-duration D      the first offset at or after now minus D (Go
                       duration: 30m, 36h)
A time after every record gives the end offset. Every new offset is
clamped to [log start, end], as Kafka does.

Partitions: --topic T (every partition of T) or --topic T:0,1 (those
partitions), repeatable; or --all-topics, the partitions the group has
committed offsets for (also the default when no --topic is given).

--json prints the plan as an array of objects: group, topic, partition,
current_offset (null when none), new_offset, log_start, end.

Flags:
`

// resetTargetFlags are the flags that each name a reset target.
var resetTargetFlags = []string{"to-earliest", "to-latest", "to-datetime", "to-offset", "shift-by", "by-duration"}

// resetKind is what a reset target moves offsets to.
type resetKind int

const (
	resetToEarliest resetKind = iota
	resetToLatest
	resetToTime   // --to-datetime and --by-duration
	resetToOffset // an absolute offset
	resetShiftBy  // relative to the committed offset
)

// resetTarget is where reset moves each selected partition's offset.
type resetTarget struct {
	kind   resetKind
	offset int64     // resetToOffset: the offset; resetShiftBy: the shift
	at     time.Time // resetToTime
}

// resetFlags are the target flags as parsed; target turns them into one
// resetTarget.
type resetFlags struct {
	earliest, latest bool
	datetime         string
	toOffset         int64
	shiftBy          int64
	byDuration       time.Duration
}

func (f *resetFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.earliest, "to-earliest", false, "reset to each partition's log start offset")
	fs.BoolVar(&f.latest, "to-latest", false, "reset to each partition's end offset")
	fs.StringVar(&f.datetime, "to-datetime", "", "reset to the first offset at or after this RFC 3339 time")
	fs.Int64Var(&f.toOffset, "to-offset", 0, "reset to this offset (clamped to [log start, end])")
	fs.Int64Var(&f.shiftBy, "shift-by", 0, "move the committed offset by this many records, negative for back (clamped)")
	fs.DurationVar(&f.byDuration, "by-duration", 0, "reset to the first offset at or after now minus this duration (e.g. 1h)")
}

// target checks that exactly one target flag was given (given: the flags
// set on the command line) and resolves it; --by-duration counts back from
// now.
func (f *resetFlags) target(given map[string]bool, now time.Time) (resetTarget, error) {
	set := map[string]bool{
		"to-earliest": f.earliest, "to-latest": f.latest, "to-datetime": given["to-datetime"],
		"to-offset": given["to-offset"], "shift-by": given["shift-by"], "by-duration": given["by-duration"],
	}
	var named []string
	for _, name := range resetTargetFlags {
		if set[name] {
			named = append(named, name)
		}
	}
	if len(named) != 1 {
		return resetTarget{}, usageErrorf("group reset needs exactly one of --%s", strings.Join(resetTargetFlags, ", --"))
	}
	switch named[0] {
	case "to-earliest":
		return resetTarget{kind: resetToEarliest}, nil
	case "to-latest":
		return resetTarget{kind: resetToLatest}, nil
	case "to-offset":
		if f.toOffset < 0 {
			return resetTarget{}, usageErrorf("--to-offset %d: want an offset of 0 or more", f.toOffset)
		}
		return resetTarget{kind: resetToOffset, offset: f.toOffset}, nil
	case "shift-by":
		return resetTarget{kind: resetShiftBy, offset: f.shiftBy}, nil
	case "by-duration":
		if f.byDuration <= 0 {
			return resetTarget{}, usageErrorf("--by-duration %v: want a positive duration, e.g. 1h", f.byDuration)
		}
		return resetTarget{kind: resetToTime, at: now.Add(-f.byDuration)}, nil
	}
	at, err := time.Parse(time.RFC3339, f.datetime)
	if err != nil {
		return resetTarget{}, usageErrorf("--to-datetime %q: want RFC 3339, e.g. 2026-11-29T10:00:00Z", f.datetime)
	}
	return resetTarget{kind: resetToTime, at: at}, nil
}

// partitionChoice is what --topic selects of one topic: every partition,
// or the ones listed (sorted, distinct).
type partitionChoice struct {
	all        bool
	partitions []int32
}

// topicSelection is every --topic value, by topic.
type topicSelection map[string]partitionChoice

// parseTopicSelection parses --topic values: "T" selects every partition
// of T, "T:0,1" partitions 0 and 1. A topic named both ways selects every
// partition. Kafka topic names cannot contain ':', so the first one splits.
func parseTopicSelection(specs []string) (topicSelection, error) {
	sel := topicSelection{}
	for _, spec := range specs {
		topic, list, hasList := strings.Cut(spec, ":")
		if topic == "" {
			return nil, usageErrorf("--topic %q: want TOPIC or TOPIC:PARTITION,...", spec)
		}
		cur := sel[topic]
		if !hasList {
			cur.all = true
			sel[topic] = cur
			continue
		}
		items := strings.Split(list, ",")
		for _, item := range items {
			p, err := strconv.ParseInt(strings.TrimSpace(item), 10, 32)
			if err != nil || p < 0 {
				return nil, usageErrorf("--topic %q: partition %q is not a partition number", spec, item)
			}
			cur.partitions = append(cur.partitions, int32(p))
		}
		slices.Sort(cur.partitions)
		cur.partitions = slices.Compact(cur.partitions)
		sel[topic] = cur
	}
	return sel, nil
}

// topics lists the selected topics, sorted.
func (s topicSelection) topics() []string {
	out := make([]string, 0, len(s))
	for t := range s {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// resolve lists the selected partitions of the topics in meta, sorted. A
// topic meta does not have, or a listed partition it does not have, is an
// error: acting on a partition that does not exist would be a typo's
// silent no-op.
func (s topicSelection) resolve(meta kadm.TopicDetails) ([]topicPartition, error) {
	var out []topicPartition
	for _, topic := range s.topics() {
		td, ok := meta[topic]
		switch {
		case !ok:
			return nil, fmt.Errorf("topic %s: not in the cluster's metadata", topic)
		case td.Err != nil:
			return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
		}
		sel := s[topic]
		if sel.all {
			for _, p := range td.Partitions.Numbers() {
				out = append(out, topicPartition{topic, p})
			}
			continue
		}
		for _, p := range sel.partitions {
			if _, ok := td.Partitions[p]; !ok {
				return nil, fmt.Errorf("topic %s has no partition %d (it has %d)", topic, p, len(td.Partitions))
			}
			out = append(out, topicPartition{topic, p})
		}
	}
	sortTopicPartitions(out)
	return out, nil
}

func sortTopicPartitions(tps []topicPartition) {
	slices.SortFunc(tps, func(a, b topicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// resetPartition is what the brokers report of one selected partition.
type resetPartition struct {
	topicPartition
	Committed int64 // -1: the group has committed nothing here
	LogStart  int64
	End       int64 // the high watermark; LogStart <= End
	AtTime    int64 // resetToTime: the first offset at or after the time; -1: none
}

// resetPlanRow is one partition's planned move.
type resetPlanRow struct {
	topicPartition
	Current  int64 // -1: nothing committed
	New      int64 // in [LogStart, End]
	LogStart int64
	End      int64
}

// planReset computes the new offset of every partition. It is pure.
func planReset(target resetTarget, parts []resetPartition) ([]resetPlanRow, error) {
	rows := make([]resetPlanRow, 0, len(parts))
	for _, p := range parts {
		offset, err := target.newOffset(p)
		if err != nil {
			return nil, err
		}
		rows = append(rows, resetPlanRow{topicPartition: p.topicPartition, Current: p.Committed, New: offset,
			LogStart: p.LogStart, End: p.End})
	}
	return rows, nil
}

// newOffset is p's new offset under t, within [p.LogStart, p.End].
func (t resetTarget) newOffset(p resetPartition) (int64, error) {
	switch t.kind {
	case resetToEarliest:
		return p.LogStart, nil
	case resetToLatest:
		return p.End, nil
	case resetToTime:
		if p.AtTime < 0 { // no record at or after the time
			return p.End, nil
		}
		return clampOffset(p.AtTime, p.LogStart, p.End), nil
	case resetToOffset:
		return clampOffset(t.offset, p.LogStart, p.End), nil
	}
	if p.Committed < 0 {
		return 0, fmt.Errorf("%s partition %d has no committed offset to shift: reset it with another target first",
			p.Topic, p.Partition)
	}
	return clampOffset(saturatingAdd(p.Committed, t.offset), p.LogStart, p.End), nil
}

// clampOffset is offset moved into [logStart, end].
// REQUIRES: logStart <= end.
func clampOffset(offset, logStart, end int64) int64 {
	return min(max(offset, logStart), end)
}

// saturatingAdd is a+b, held at the int64 limits instead of wrapping.
func saturatingAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// resetRequest is a parsed `group reset` command line.
type resetRequest struct {
	group   string
	target  resetTarget
	sel     topicSelection // empty: the partitions the group has committed
	execute bool
	asJSON  bool
}

func groupReset(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group reset GROUP", c)
	admin := adminFlags(fs, c)
	req, err := parseResetArgs(fs, args)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	busy, err := checkGroupEmpty(ctx, adm, req.group)
	if err != nil {
		return err
	}
	if busy != nil {
		if req.execute {
			return busy
		}
		fmt.Fprintf(c.stderr, "strata: %v; --execute is refused until then\n", busy)
	}
	parts, err := gatherReset(ctx, adm, req.group, req.sel, req.target)
	if err != nil {
		return err
	}
	plan, err := planReset(req.target, parts)
	if err != nil {
		return err
	}
	if req.asJSON {
		err = printResetPlanJSON(c.stdout, req.group, plan)
	} else {
		err = printResetPlan(c.stdout, req.group, plan)
	}
	if err != nil {
		return err
	}
	if !req.execute {
		fmt.Fprintln(c.stderr, "strata: plan only, nothing committed; add --execute to commit these offsets")
		return nil
	}
	summary := c.stdout
	if req.asJSON {
		summary = c.stderr // stdout stays one JSON document
	}
	return commitReset(ctx, summary, adm, req.group, plan)
}

// parseResetArgs registers reset's own flags on fs (which has the
// connection flags) and parses args.
func parseResetArgs(fs *flag.FlagSet, args []string) (resetRequest, error) {
	var targetFlags resetFlags
	targetFlags.register(fs)
	var topics stringList
	fs.Var(&topics, "topic", "`T` (every partition) or T:0,1 (those partitions) to reset (repeatable)")
	allTopics := fs.Bool("all-topics", false, "reset every partition the group has committed offsets for (the default without --topic)")
	execute := fs.Bool("execute", false, "commit the planned offsets (default: only print the plan)")
	dryRun := fs.Bool("dry-run", false, "only print the plan (the default; kept for scripts)")
	asJSON := jsonFlag(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), groupResetHelp)
		fs.PrintDefaults()
	}
	names, err := parseArgs(fs, args)
	if err != nil {
		return resetRequest{}, err
	}
	if len(names) != 1 {
		return resetRequest{}, usageErrorf("group reset needs exactly one group name")
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	target, err := targetFlags.target(given, time.Now())
	if err != nil {
		return resetRequest{}, err
	}
	switch {
	case *execute && *dryRun:
		return resetRequest{}, usageErrorf("--execute and --dry-run contradict each other")
	case *allTopics && len(topics) > 0:
		return resetRequest{}, usageErrorf("--all-topics and --topic contradict each other")
	}
	sel, err := parseTopicSelection(topics)
	return resetRequest{group: names[0], target: target, sel: sel, execute: *execute, asJSON: *asJSON}, err
}

// checkGroupEmpty refuses to move the offsets of a group with live members
// (they would overwrite them with their next commit), as Kafka's
// kafka-consumer-groups --reset-offsets does, for classic and
// consumer-protocol groups alike. DescribeGroups describes both kinds; a
// consumer-protocol group's states are Empty, Assigning, Reconciling and
// Stable, and an unknown group is Dead.
//
// busy is the coordinator's verdict against --execute (a plan is still
// printed with it); err is a failure to ask at all (no plan can follow).
func checkGroupEmpty(ctx context.Context, adm *kadm.Client, group string) (busy, err error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	d := described[group]
	if d.Err != nil {
		return fmt.Errorf("group %s: %w", group, d.Err), nil
	}
	if d.State != "Empty" && d.State != "Dead" || len(d.Members) > 0 {
		return fmt.Errorf("group %s has %d active members (state %s): stop its consumers first", group, len(d.Members), d.State), nil
	}
	return nil, nil
}

// gatherReset reads, for each partition sel names (every committed one
// when sel is empty), what planReset needs.
func gatherReset(ctx context.Context, adm *kadm.Client, group string, sel topicSelection, target resetTarget) ([]resetPartition, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of %s: %w", group, err)
	}
	tps, err := selectResetPartitions(ctx, adm, group, sel, committed)
	if err != nil {
		return nil, err
	}
	topics := partitionTopicNames(tps)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var atTime kadm.ListedOffsets
	if target.kind == resetToTime {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), topics...); err != nil {
			return nil, err
		}
	}
	parts := make([]resetPartition, 0, len(tps))
	for _, tp := range tps {
		p := resetPartition{topicPartition: tp, Committed: -1, AtTime: -1}
		if o, ok := committed.Lookup(tp.Topic, tp.Partition); ok {
			p.Committed = o.At
		}
		if p.LogStart, err = listedOffset(starts, tp, "log start"); err != nil {
			return nil, err
		}
		if p.End, err = listedOffset(ends, tp, "end"); err != nil {
			return nil, err
		}
		if atTime != nil {
			if p.AtTime, err = listedOffset(atTime, tp, "offset at "+target.at.UTC().Format(time.RFC3339)); err != nil {
				return nil, err
			}
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// selectResetPartitions is sel resolved against the cluster's metadata,
// or, when sel is empty, the partitions the group has committed.
func selectResetPartitions(ctx context.Context, adm *kadm.Client, group string, sel topicSelection, committed kadm.OffsetResponses) ([]topicPartition, error) {
	if len(sel) > 0 {
		meta, err := adm.ListTopics(ctx, sel.topics()...)
		if err != nil {
			return nil, err
		}
		return sel.resolve(meta)
	}
	var tps []topicPartition
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			tps = append(tps, topicPartition{o.Topic, o.Partition})
		}
	})
	if len(tps) == 0 {
		return nil, fmt.Errorf("group %s has no committed offsets: name the topics with --topic", group)
	}
	sortTopicPartitions(tps)
	return tps, nil
}

func partitionTopicNames(tps []topicPartition) []string {
	var topics []string
	for _, tp := range tps {
		topics = append(topics, tp.Topic)
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// listedOffset is tp's offset in listed, or why there is none.
func listedOffset(listed kadm.ListedOffsets, tp topicPartition, what string) (int64, error) {
	o, ok := listed.Lookup(tp.Topic, tp.Partition)
	switch {
	case !ok:
		return 0, fmt.Errorf("%s partition %d: no %s offset listed", tp.Topic, tp.Partition, what)
	case o.Err != nil:
		return 0, fmt.Errorf("%s partition %d: listing its %s offset: %w", tp.Topic, tp.Partition, what, o.Err)
	}
	return o.Offset, nil
}

func printResetPlan(w io.Writer, group string, plan []resetPlanRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET\tLOG-START\tEND")
	for _, r := range plan {
		current := "-"
		if r.Current >= 0 {
			current = strconv.FormatInt(r.Current, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\n", group, r.Topic, r.Partition, current, r.New, r.LogStart, r.End)
	}
	return tw.Flush()
}

// resetPlanJSON is one element of `group reset --json`.
type resetPlanJSON struct {
	Group         string `json:"group"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"current_offset"` // null: nothing committed
	NewOffset     int64  `json:"new_offset"`
	LogStart      int64  `json:"log_start"`
	End           int64  `json:"end"`
}

func printResetPlanJSON(w io.Writer, group string, plan []resetPlanRow) error {
	out := make([]resetPlanJSON, 0, len(plan))
	for _, r := range plan {
		j := resetPlanJSON{Group: group, Topic: r.Topic, Partition: r.Partition, NewOffset: r.New, LogStart: r.LogStart, End: r.End}
		if r.Current >= 0 {
			j.CurrentOffset = &r.Current
		}
		out = append(out, j)
	}
	return writeJSON(w, out)
}

// commitReset commits plan as group's offsets and says so on w.
func commitReset(ctx context.Context, w io.Writer, adm *kadm.Client, group string, plan []resetPlanRow) error {
	offsets := kadm.Offsets{}
	for _, r := range plan {
		offsets.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.New, LeaderEpoch: -1})
	}
	resps, err := adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("committing offsets of %s: %w", group, err)
	}
	_, err = fmt.Fprintf(w, "reset %d partitions of group %s\n", len(plan), group)
	return err
}
