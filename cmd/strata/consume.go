package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const consumeHelp = `usage: strata consume --topic TOPIC [flags]

Print the records of a topic, one per line (see --format), until
interrupted (exit 0), --count records, or with --exit-at-end the end of
the log as it was at the start.

Without --group the command reads the chosen partitions (--partition,
default all) directly and commits nothing. With --group it joins that
consumer group, reads the partitions the group assigns it, starts at the
group's committed offsets, and commits what it printed (every few seconds
and on exit); the start flags then apply only to partitions without a
committed offset.

Start (at most one; default: the end, i.e. only new records):
  --offset start|end|N|-N   N: that offset; -N: N records before the end.
                            An offset outside the log starts at its nearest
                            end.
  --from-timestamp T        the first record stamped at or after T (ms since
                            the epoch, or RFC 3339: 2024-05-01T12:00:00Z)
  --from-beginning          the same as --offset start

--format json prints one object per line:
  {"topic","partition","offset","timestamp" (ms),"key","value",
   "headers":[{"key","value"}]}
key and value (and header values) are JSON strings when the bytes are valid
UTF-8 and null when absent; other bytes are left out of "key"/"value" and
given in standard base64 as "key_base64"/"value_base64".

Flags:
`

// consumeOptions are the parsed flags of `strata consume`.
type consumeOptions struct {
	topic      string
	start      startSpec
	partitions []int32 // nil: every partition
	group      string
	format     recordFormatter
	count      int  // 0: no limit
	exitAtEnd  bool // stop at each partition's HW as of the start
}

func parseConsumeFlags(c *cli, args []string) (consumeOptions, *connFlags, error) {
	fs := newFlagSet("consume", c)
	conn := newConnFlags(fs, c)
	topic := fs.String("topic", "", "topic to read (required)")
	offset := fs.String("offset", "", "start at `offset`: start, end, N (absolute) or -N (N records before the end)")
	fromTimestamp := fs.String("from-timestamp", "", "start at the first record stamped at or after `T` (ms since the epoch or RFC 3339)")
	fromBeginning := fs.Bool("from-beginning", false, "start at the log start offset instead of the end")
	partitions := fs.String("partition", "", "read only these `partitions` (comma-separated; not with --group)")
	group := fs.String("group", "", "consume as a member of this consumer `group`, committing offsets")
	format := fs.String("format", "value", formatHelp)
	printKeys := fs.Bool("print-key", false, "print key<TAB>value (the same as --format key:value)")
	count := fs.Int("count", 0, "exit after this many records (0: no limit)")
	exitAtEnd := fs.Bool("exit-at-end", false, "exit once every partition is read up to its high watermark as of the start (not with --group)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), consumeHelp)
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return consumeOptions{}, nil, firstErr(err, usageErrorf("unexpected arguments %q", rest))
	}
	o := consumeOptions{topic: *topic, group: *group, count: *count, exitAtEnd: *exitAtEnd}
	switch {
	case o.topic == "":
		return o, nil, usageErrorf("--topic is required")
	case o.count < 0:
		return o, nil, usageErrorf("--count must be ≥ 0")
	case o.group != "" && (*partitions != "" || o.exitAtEnd):
		return o, nil, usageErrorf("--partition and --exit-at-end need direct reading: the group, not this command, picks the partitions with --group")
	case *printKeys && *format != "value" && *format != "key:value":
		return o, nil, usageErrorf("--print-key is --format key:value; give one of them")
	}
	if *printKeys {
		*format = "key:value"
	}
	var err error
	if o.format, err = parseRecordFormat(*format); err != nil {
		return o, nil, err
	}
	if o.start, err = parseStart(*offset, *fromTimestamp, *fromBeginning); err != nil {
		return o, nil, err
	}
	if *partitions != "" {
		if o.partitions, err = parsePartitions(*partitions); err != nil {
			return o, nil, err
		}
	}
	return o, conn, nil
}

// runConsume prints the records of a topic; see consumeHelp.
func runConsume(ctx context.Context, c *cli, args []string) error {
	o, conn, err := parseConsumeFlags(c, args)
	if err != nil {
		return err
	}
	if o.group != "" {
		return consumeInGroup(ctx, c, conn, o)
	}
	return consumeDirect(ctx, c, conn, o)
}

// consumeDirect reads the chosen partitions from exact offsets resolved
// up front, without a group.
func consumeDirect(ctx context.Context, c *cli, conn *connFlags, o consumeOptions) error {
	var opts []kgo.Opt
	if o.exitAtEnd {
		// The last offset below the HW may hold a transaction marker, which
		// kgo otherwise drops: keep markers so the end is seen.
		opts = append(opts, kgo.KeepControlRecords())
	}
	cl, conf, err := conn.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	partitions, err := checkTopic(ctx, cl, conf.seeds, o.topic, false)
	if err != nil {
		return err
	}
	if err := checkPartitions(o.topic, o.partitions, partitions); err != nil {
		return err
	}
	listCtx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	bounds, err := listBounds(listCtx, kadm.NewClient(cl), o.topic, o.partitions, o.start)
	cancel()
	if err != nil {
		return err
	}
	offsets := make(map[int32]kgo.Offset, len(bounds))
	var ends *endTracker
	if o.exitAtEnd {
		ends = &endTracker{unread: map[int32]int64{}}
	}
	for p, b := range bounds {
		start := o.start.resolve(b)
		offsets[p] = kgo.NewOffset().At(start)
		if ends != nil && start < b.highWatermark {
			ends.unread[p] = b.highWatermark
		}
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: offsets})
	_, err = printRecords(ctx, c, cl, o, ends)
	return err
}

// groupCommitTimeout bounds the final commit of a group member.
const groupCommitTimeout = 10 * time.Second

// consumeInGroup reads as a member of o.group. kgo commits what was polled
// every few seconds; the final commit covers the rest, so the group resumes
// after the last record printed, also after Ctrl-C.
func consumeInGroup(ctx context.Context, c *cli, conn *connFlags, o consumeOptions) error {
	cl, conf, err := conn.client(kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(o.topic), kgo.ConsumeStartOffset(o.start.kgoOffset()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := checkTopic(ctx, cl, conf.seeds, o.topic, false); err != nil {
		return err
	}
	printed, err := printRecords(ctx, c, cl, o, nil)
	if printed == 0 {
		return err
	}
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupCommitTimeout)
	defer cancel()
	if commitErr := cl.CommitUncommittedOffsets(commitCtx); commitErr != nil {
		return errors.Join(err, fmt.Errorf("commit offsets of group %s: %w", o.group, commitErr))
	}
	return err
}

// printRecords polls and prints until ctx ends, o.count records are
// printed, or ends (nil: never) says every partition is read. Every record
// polled is printed before the next poll, so a group commits only printed
// records.
func printRecords(ctx context.Context, c *cli, cl *kgo.Client, o consumeOptions, ends *endTracker) (printed int, err error) {
	out := bufio.NewWriter(c.stdout)
	defer func() { err = errors.Join(err, out.Flush()) }()
	for (o.count == 0 || printed < o.count) && !ends.done() {
		fetches := cl.PollRecords(ctx, o.count-printed) // ≤ 0: all buffered
		if ctx.Err() != nil {
			return printed, nil // interrupted: a normal way to stop
		}
		if err := fatalFetchError(fetches); err != nil {
			return printed, err
		}
		for iter := fetches.RecordIter(); !iter.Done(); {
			r := iter.Next()
			if wanted := ends.wanted(r); !wanted || r.Attrs.IsControl() {
				continue
			}
			if err := o.format(out, r); err != nil {
				return printed, err
			}
			printed++
		}
		if err := out.Flush(); err != nil {
			return printed, err
		}
	}
	return printed, nil
}

// endTracker follows --exit-at-end: the partitions not yet read up to
// their high watermark as of the start. A nil tracker never ends.
type endTracker struct {
	unread map[int32]int64 // partition → HW as of the start
}

func (t *endTracker) done() bool { return t != nil && len(t.unread) == 0 }

// wanted notes r's progress and says whether to print it: records at or
// past the start's HW are newer than the end being read to.
func (t *endTracker) wanted(r *kgo.Record) bool {
	if t == nil {
		return true
	}
	hw, ok := t.unread[r.Partition]
	if !ok {
		return false
	}
	if r.Offset+1 >= hw {
		delete(t.unread, r.Partition)
	}
	return r.Offset < hw
}
