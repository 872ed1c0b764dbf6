package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition reassignment (KIP-455) from the operator's side: submit the
// wanted replicas with AlterPartitionReassignments, then watch
// ListPartitionReassignments and Metadata until the controller is done.
// The controller does the work; these commands only ask and watch.

// runPartition dispatches `strata partition <verb>`.
func runPartition(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "partition", map[string]verb{
		"reassign":      {partitionReassign, "move partitions to other brokers (or cancel a move) and wait for it"},
		"reassignments": {partitionReassignments, "list ongoing reassignments"},
	}, args)
}

// reassignPoll is how often the wait asks for progress.
const reassignPoll = time.Second

// defaultReassignTimeout bounds a wait: moving a partition copies its hot
// tail (history stays in the bucket), which takes minutes, not hours.
const defaultReassignTimeout = 30 * time.Minute

// reassignClientFlags registers the connection flags for a command that
// watches reassignments: its client's Metadata is at most half a poll old
// (kgo caches it for 5s by default, which would lag each finished move).
func reassignClientFlags(fs *flag.FlagSet, c *cli) func() (*kgo.Client, error) {
	conn := newConnFlags(fs, c)
	return func() (*kgo.Client, error) {
		cl, _, err := conn.client(kgo.MetadataMinAge(reassignPoll / 2))
		return cl, err
	}
}

// reassignWait are the flags of the commands that submit and wait.
type reassignWait struct {
	noWait  *bool
	timeout *time.Duration
}

func newReassignWait(fs *flag.FlagSet) reassignWait {
	return reassignWait{
		noWait:  fs.Bool("no-wait", false, "submit and return; 'strata partition reassignments' shows progress"),
		timeout: fs.Duration("timeout", defaultReassignTimeout, "how long to wait for the reassignments to finish"),
	}
}

func partitionReassign(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("partition reassign (--topic T --partition P --replicas 4,2,3 | --file plan.json) [--cancel]", c)
	conn := reassignClientFlags(fs, c)
	topic := fs.String("topic", "", "topic of the partition to move")
	partition := fs.Int("partition", -1, "partition to move")
	replicas := fs.String("replicas", "", "wanted replica `ids`, comma-separated, preferred leader first (e.g. 4,2,3)")
	file := fs.String("file", "", "kafka-reassign-partitions plan `file` ({\"version\":1,\"partitions\":[{\"topic\":..,\"partition\":..,\"replicas\":[..]}]})")
	cancel := fs.Bool("cancel", false, "cancel the ongoing reassignment of the partitions named (KIP-455); replicas are not needed")
	wait := newReassignWait(fs)
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("partition reassign takes flags only"))
	}
	targets, err := reassignTargets(*topic, *partition, *replicas, *file, *cancel)
	if err != nil {
		return err
	}
	cl, err := conn()
	if err != nil {
		return err
	}
	defer cl.Close()
	return submitAndWait(ctx, c, kadm.NewClient(cl), targets, wait)
}

// reassignTargets turns the flags into what to submit.
func reassignTargets(topic string, partition int, replicas, file string, cancel bool) ([]reassignTarget, error) {
	single := topic != "" || partition >= 0 || replicas != ""
	switch {
	case file != "" && single:
		return nil, usageErrorf("give --file or --topic/--partition/--replicas, not both")
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return parseReassignFile(data, cancel)
	case topic == "" || partition < 0:
		return nil, usageErrorf("want --topic and --partition (or --file)")
	case cancel && replicas != "":
		return nil, usageErrorf("--cancel takes no --replicas")
	case cancel:
		return []reassignTarget{{Topic: topic, Partition: int32(partition)}}, nil
	case replicas == "":
		return nil, usageErrorf("want --replicas (or --cancel)")
	}
	ids, err := parseReplicaList(replicas)
	if err != nil {
		return nil, err
	}
	return []reassignTarget{{Topic: topic, Partition: int32(partition), Replicas: ids}}, nil
}

// submitAndWait submits targets, then (unless --no-wait) waits for the
// accepted ones. Partitions the broker refused are reported at the end,
// after the others finished.
func submitAndWait(ctx context.Context, c *cli, adm *kadm.Client, targets []reassignTarget, wait reassignWait) error {
	accepted, refused := submitReassignments(ctx, c, adm, targets)
	if len(accepted) == 0 || *wait.noWait {
		return refused
	}
	return firstErr(waitReassignments(ctx, c.stdout, adm, accepted, *wait.timeout), refused)
}

// submitReassignments sends one AlterPartitionReassignments and prints a
// line per accepted partition. It returns those, and an error naming the
// refused ones with the broker's reasons.
func submitReassignments(ctx context.Context, c *cli, adm *kadm.Client, targets []reassignTarget) ([]reassignTarget, error) {
	var req kadm.AlterPartitionAssignmentsReq
	for _, t := range targets {
		req.Assign(t.Topic, t.Partition, t.Replicas)
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, explainUnsupported(ctx, adm, err)
	}
	var accepted []reassignTarget
	var refusals []error
	for _, t := range targets {
		r, ok := resps[t.Topic][t.Partition]
		switch {
		case !ok:
			refusals = append(refusals, fmt.Errorf("%s: the broker did not answer for it", t.name()))
		case r.Err != nil:
			refusals = append(refusals, fmt.Errorf("%s: %w", t.name(), withMessage(r.Err, r.ErrMessage)))
		case t.Replicas == nil:
			fmt.Fprintf(c.stdout, "%s: cancelling its reassignment\n", t.name())
			accepted = append(accepted, t)
		default:
			fmt.Fprintf(c.stdout, "%s: reassigning to %s\n", t.name(), brokerList(t.Replicas))
			accepted = append(accepted, t)
		}
	}
	return accepted, joinRefusals(c.stderr, refusals, len(targets))
}

// joinRefusals is one refusal as the error, or each on its own stderr line
// and a count as the error.
func joinRefusals(stderr io.Writer, refusals []error, total int) error {
	if len(refusals) <= 1 {
		return firstErr(refusals...)
	}
	for _, err := range refusals {
		fmt.Fprintln(stderr, err)
	}
	return fmt.Errorf("the broker refused %d of %d reassignments", len(refusals), total)
}

// apiAlterPartitionReassignments is AlterPartitionReassignments' key.
const apiAlterPartitionReassignments = 45

// explainUnsupported turns kgo's "broker is too old" for a broker that
// does not offer AlterPartitionReassignments into what to do about it.
func explainUnsupported(ctx context.Context, adm *kadm.Client, err error) error {
	versions, verr := adm.ApiVersions(ctx)
	if verr != nil {
		return err
	}
	supported := false
	versions.Each(func(v kadm.BrokerApiVersions) {
		if _, ok := v.KeyMaxVersion(apiAlterPartitionReassignments); ok && v.Err == nil {
			supported = true
		}
	})
	if supported {
		return err
	}
	return fmt.Errorf("the brokers do not support AlterPartitionReassignments (KIP-455): upgrade them to move partitions")
}

// reassignProgress is one partition's state while it moves.
type reassignProgress struct {
	replicas, isr, adding, removing []int32
	leader                          int32
	ongoing                         bool // listed by ListPartitionReassignments
}

func (p reassignProgress) String() string {
	s := fmt.Sprintf("replicas %s  isr %s  leader %d", brokerList(p.replicas), brokerList(p.isr), p.leader)
	if p.ongoing {
		s += fmt.Sprintf("  adding %s  removing %s", brokerList(p.adding), brokerList(p.removing))
	}
	return s
}

// settleChecks is how many polls a finished partition may show other
// replicas than asked before that is reported: the broker answering
// Metadata may lag the controller by a moment.
const settleChecks = 5

// waitReassignments polls every reassignPoll until no target is still
// reassigning, printing a line whenever a partition's state changes. It
// fails at timeout (the reassignments go on) or when a finished partition
// holds other replicas than asked (cancelled or overridden).
func waitReassignments(ctx context.Context, w io.Writer, adm *kadm.Client, targets []reassignTarget, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	pending := map[string]reassignTarget{}
	set := kadm.TopicsSet{}
	for _, t := range targets {
		pending[t.name()] = t
		set.Add(t.Topic, t.Partition)
	}
	shown, mismatched := map[string]string{}, map[string]int{}
	var wrong []error
	var lastErr error
	tick := time.NewTicker(reassignPoll)
	defer tick.Stop()
	for len(pending) > 0 {
		states, err := reassignStates(ctx, adm, set)
		switch {
		case err != nil && !retriableAdminErr(err):
			return err
		case err != nil:
			lastErr = err
		default:
			for _, name := range sortedKeys(pending) {
				t, p := pending[name], states[name]
				if line := p.String(); line != shown[name] {
					fmt.Fprintf(w, "%s: %s\n", name, line)
					shown[name] = line
				}
				if p.ongoing {
					continue
				}
				if t.Replicas != nil && !slices.Equal(p.replicas, t.Replicas) && mismatched[name] < settleChecks {
					mismatched[name]++
					continue
				}
				if t.Replicas != nil && !slices.Equal(p.replicas, t.Replicas) {
					wrong = append(wrong, fmt.Errorf("%s: finished with replicas %s, not %s (cancelled or reassigned again?)",
						name, brokerList(p.replicas), brokerList(t.Replicas)))
				}
				delete(pending, name)
				set.Delete(t.Topic, t.Partition)
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return waitTimeoutErr(ctx, len(pending), lastErr)
		case <-tick.C:
		}
	}
	fmt.Fprintf(w, "%d partitions reassigned in %s\n", len(targets)-len(wrong), formatDuration(time.Since(start)))
	return errors.Join(wrong...)
}

func waitTimeoutErr(ctx context.Context, pending int, lastErr error) error {
	err := fmt.Errorf("%d partitions still reassigning (%w); the brokers carry on: 'strata partition reassignments' shows them, 'strata partition reassign --cancel' stops one",
		pending, context.Cause(ctx))
	if lastErr != nil {
		err = fmt.Errorf("%w; last error: %v", err, lastErr)
	}
	return err
}

// reassignStates reads the set's partitions from ListPartitionReassignments
// (adding, removing) and Metadata (replicas, ISR, leader).
func reassignStates(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) (map[string]reassignProgress, error) {
	ongoing, err := adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return nil, err
	}
	md, err := adm.Metadata(ctx, set.Topics()...)
	if err != nil {
		return nil, err
	}
	out := map[string]reassignProgress{}
	set.Each(func(topic string, partition int32) {
		name := reassignTarget{Topic: topic, Partition: partition}.name()
		p := reassignProgress{leader: -1}
		if d, ok := md.Topics[topic].Partitions[partition]; ok {
			p.replicas, p.isr, p.leader = d.Replicas, d.ISR, d.Leader
		}
		if r, ok := ongoing[topic][partition]; ok {
			p.ongoing, p.adding, p.removing = true, r.AddingReplicas, r.RemovingReplicas
		}
		out[name] = p
	})
	return out, nil
}

// retriableAdminErr: worth asking again while waiting (a controller or
// leader moving, a connection dropped); anything else ends the wait.
func retriableAdminErr(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable
	}
	return kgo.IsRetryableBrokerErr(err)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listedReassignment is one row of `partition reassignments`.
type listedReassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
}

func partitionReassignments(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("partition reassignments", c)
	conn := clientFlags(fs, c)
	asJSON := jsonFlag(fs)
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("partition reassignments takes no arguments"))
	}
	cl, err := conn()
	if err != nil {
		return err
	}
	defer cl.Close()
	rows, err := listAllReassignments(ctx, cl)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.stdout, "no reassignments in progress")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Topic, r.Partition, brokerList(r.Replicas), brokerList(r.Adding), brokerList(r.Removing))
	}
	return tw.Flush()
}

// listAllReassignments asks with a raw request: null topics lists every
// ongoing reassignment, which kadm's (a set of partitions) cannot ask.
func listAllReassignments(ctx context.Context, cl *kgo.Client) ([]listedReassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, withMessage(err, derefOr(resp.ErrorMessage, ""))
	}
	rows := []listedReassignment{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			rows = append(rows, listedReassignment{Topic: t.Topic, Partition: p.Partition,
				Replicas: orEmpty(p.Replicas), Adding: orEmpty(p.AddingReplicas), Removing: orEmpty(p.RemovingReplicas)})
		}
	}
	slices.SortFunc(rows, func(a, b listedReassignment) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rows, nil
}

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
