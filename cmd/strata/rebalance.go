package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/reassign"
)

// `cluster balance` and `broker drain`: plan with package reassign from
// the live Metadata, show the plan, submit it and wait like `partition
// reassign`.

// runBroker dispatches `strata broker <verb>`.
func runBroker(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "broker", map[string]verb{
		"drain": {brokerDrain, "move every replica off a broker so that it can be stopped"},
	}, args)
}

func brokerDrain(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("broker drain ID", c)
	conn := reassignClientFlags(fs, c)
	dryRun := fs.Bool("dry-run", false, "print the plan, submit nothing")
	asJSON := jsonFlag(fs)
	wait := newReassignWait(fs)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("broker drain takes one broker id")
	}
	node, err := strconv.ParseInt(rest[0], 10, 32)
	if err != nil || node < 0 {
		return usageErrorf("broker drain %q: want a broker id", rest[0])
	}
	cl, err := conn()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cluster, err := liveCluster(ctx, adm)
	if err != nil {
		return err
	}
	moves, err := reassign.Drain(cluster, int32(node))
	if err != nil {
		return err
	}
	report := newPlanReport(cluster, moves)
	if err := showPlan(c.stdout, report, *asJSON); err != nil || *dryRun {
		return err
	}
	if len(moves) > 0 {
		if err := submitAndWait(ctx, c, adm, report.targets(), wait); err != nil || *wait.noWait {
			return err
		}
	}
	return verifyDrained(ctx, c.stdout, adm, int32(node))
}

// verifyDrained checks with a fresh Metadata that node holds and leads no
// partition.
func verifyDrained(ctx context.Context, w io.Writer, adm *kadm.Client, node int32) error {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return err
	}
	diskless, err := disklessTopics(ctx, adm, md)
	if err != nil {
		return err
	}
	held, led := 0, 0
	for _, p := range clusterFromMetadata(md, diskless).Partitions {
		for _, id := range p.Replicas {
			if id == node {
				held++
			}
		}
		if p.Leader == node {
			led++
		}
	}
	if held > 0 || led > 0 {
		return fmt.Errorf("broker %d still holds %d replicas and leads %d partitions; run drain again", node, held, led)
	}
	fmt.Fprintf(w, "broker %d holds no replicas: safe to stop\n", node)
	return nil
}

func clusterBalanceCmd(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("cluster balance", c)
	conn := reassignClientFlags(fs, c)
	dryRun := fs.Bool("dry-run", false, "print the plan, submit nothing")
	asJSON := jsonFlag(fs)
	wait := newReassignWait(fs)
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("cluster balance takes no arguments"))
	}
	cl, err := conn()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cluster, err := liveCluster(ctx, adm)
	if err != nil {
		return err
	}
	report := newPlanReport(cluster, reassign.BalanceEachTopic(cluster))
	if err := showPlan(c.stdout, report, *asJSON); err != nil || *dryRun || len(report.Moves) == 0 {
		return err
	}
	if err := submitAndWait(ctx, c, adm, report.targets(), wait); err != nil || *wait.noWait {
		return err
	}
	return electPreferred(ctx, c.stdout, adm, report.targets())
}

// liveCluster is the planner's input from a fresh Metadata.
func liveCluster(ctx context.Context, adm *kadm.Client) (reassign.Cluster, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return reassign.Cluster{}, err
	}
	diskless, err := disklessTopics(ctx, adm, md)
	if err != nil {
		return reassign.Cluster{}, err
	}
	return clusterFromMetadata(md, diskless), nil
}

func showPlan(w io.Writer, r planReport, asJSON bool) error {
	if asJSON {
		return writeJSON(w, r)
	}
	return printPlan(w, r)
}

// electPreferred makes the moved partitions' first replicas their leaders,
// which is what evens out leadership; a partition already led by it
// (ELECTION_NOT_NEEDED) is fine.
func electPreferred(ctx context.Context, w io.Writer, adm *kadm.Client, targets []reassignTarget) error {
	set := kadm.TopicsSet{}
	for _, t := range targets {
		set.Add(t.Topic, t.Partition)
	}
	results, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return fmt.Errorf("preferred leader election: %w", err)
	}
	var failed []error
	elected := 0
	for _, t := range targets {
		r, ok := results[t.Topic][t.Partition]
		switch {
		case !ok:
		case r.Err == nil:
			elected++
		case r.Err == kerr.ElectionNotNeeded:
		default:
			failed = append(failed, fmt.Errorf("%s: preferred leader election: %w", t.name(), withMessage(r.Err, r.ErrMessage)))
		}
	}
	fmt.Fprintf(w, "preferred leaders elected for %d partitions\n", elected)
	return firstErr(failed...)
}
