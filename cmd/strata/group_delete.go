package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// `strata group delete` (DeleteGroups) and `strata group delete-offsets`
// (OffsetDelete), as kafka-consumer-groups --delete and --delete-offsets.
// The coordinator refuses both while members could recommit what they
// delete: a group with members is NON_EMPTY_GROUP, a topic its members
// subscribe to is GROUP_SUBSCRIBED_TO_TOPIC. Each refusal is reported
// with what to do about it.

const groupDeleteHelp = `usage: strata group delete GROUP...

Deletes each group with its committed offsets (DeleteGroups), as
kafka-consumer-groups --delete does. A group with active members is refused
(NON_EMPTY_GROUP): stop its consumers first. An unknown group is an error;
the other groups named are still deleted.

Flags:
`

const groupDeleteOffsetsHelp = `usage: strata group delete-offsets GROUP --topic T[:P,...]...

Deletes GROUP's committed offsets of the partitions named (OffsetDelete), as
kafka-consumer-groups --delete-offsets does: --topic T for every partition
of T, --topic T:0,1 for those partitions; repeatable. Prints one row per
partition. The coordinator refuses a topic the group's active members
subscribe to (GROUP_SUBSCRIBED_TO_TOPIC), since they would commit it again;
the command then fails, naming the partitions that kept their offsets.

Flags:
`

// groupDelete deletes each named group, reporting each success on stdout
// and each refusal as an error; one group's refusal does not stop the
// others.
func groupDelete(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group delete GROUP...", c)
	admin := adminFlags(fs, c)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), groupDeleteHelp)
		fs.PrintDefaults()
	}
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErrorf("group delete needs at least one group name")
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	resps, reqErr := adm.DeleteGroups(ctx, names...)
	var errs []error
	for _, name := range names {
		r, ok := resps[name]
		switch {
		case !ok && reqErr != nil:
			errs = append(errs, fmt.Errorf("group %s: %w", name, reqErr))
		case !ok:
			errs = append(errs, fmt.Errorf("group %s: not in the DeleteGroups response", name))
		case r.Err != nil:
			errs = append(errs, explainDeleteGroup(name, r.Err))
		default:
			fmt.Fprintf(c.stdout, "deleted group %s\n", name)
		}
	}
	return errors.Join(errs...)
}

// explainDeleteGroup says why the coordinator refused to delete group.
func explainDeleteGroup(group string, err error) error {
	switch {
	case errors.Is(err, kerr.NonEmptyGroup):
		return fmt.Errorf("group %s not deleted: it has active members; stop its consumers (or wait for their sessions to time out) and retry: %w", group, err)
	case errors.Is(err, kerr.GroupIDNotFound):
		return fmt.Errorf("group %s does not exist: %w", group, err)
	}
	return fmt.Errorf("group %s not deleted: %w", group, err)
}

// groupDeleteOffsets deletes one group's committed offsets of the
// selected partitions and prints the outcome of each.
func groupDeleteOffsets(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group delete-offsets GROUP --topic T[:P,...]...", c)
	admin := adminFlags(fs, c)
	var topics stringList
	fs.Var(&topics, "topic", "`T` (every partition) or T:0,1 (those partitions) whose offsets to delete (repeatable, required)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), groupDeleteOffsetsHelp)
		fs.PrintDefaults()
	}
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageErrorf("group delete-offsets needs exactly one group name")
	}
	if len(topics) == 0 {
		return usageErrorf("group delete-offsets needs --topic T or --topic T:0,1")
	}
	sel, err := parseTopicSelection(topics)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	group := names[0]
	meta, err := adm.ListTopics(ctx, sel.topics()...)
	if err != nil {
		return err
	}
	tps, err := sel.resolve(meta)
	if err != nil {
		return err
	}
	set := kadm.TopicsSet{}
	for _, tp := range tps {
		if set[tp.Topic] == nil {
			set[tp.Topic] = map[int32]struct{}{}
		}
		set[tp.Topic][tp.Partition] = struct{}{}
	}
	resps, err := adm.DeleteOffsets(ctx, group, set)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return fmt.Errorf("group %s does not exist: %w", group, err)
	case err != nil:
		return fmt.Errorf("deleting offsets of group %s: %w", group, err)
	}
	return printDeleteOffsets(c.stdout, group, tps, resps)
}

// printDeleteOffsets prints one row per partition and returns an error
// naming the partitions whose offsets were not deleted.
func printDeleteOffsets(w io.Writer, group string, tps []topicPartition, resps kadm.DeleteOffsetsResponses) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tRESULT")
	failed := 0
	var reasons []error
	seen := map[string]bool{}
	for _, tp := range tps {
		result := "deleted"
		err, ok := resps.Lookup(tp.Topic, tp.Partition)
		if !ok {
			err = errors.New("not in the OffsetDelete response")
		}
		if err != nil {
			failed++
			result = "not deleted: " + err.Error()
			if reason := explainDeleteOffsets(group, tp.Topic, err); !seen[reason.Error()] {
				seen[reason.Error()] = true
				reasons = append(reasons, reason)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", group, tp.Topic, tp.Partition, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d partitions of group %s kept their offsets: %w", failed, len(tps), group, errors.Join(reasons...))
}

// explainDeleteOffsets says why topic's offsets of group were not deleted.
func explainDeleteOffsets(group, topic string, err error) error {
	if errors.Is(err, kerr.GroupSubscribedToTopic) {
		return fmt.Errorf("active members of group %s subscribe to topic %s, so they would commit its offsets again; "+
			"stop them or drop %s from their subscription first: %w", group, topic, topic, err)
	}
	return fmt.Errorf("topic %s: %w", topic, err)
}
