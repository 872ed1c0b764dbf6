package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/reassign"
)

// The pure parts of the reassignment commands: the plan file, the
// replica lists, the cluster read from Metadata and the plan as shown.

// reassignTarget is one partition to reassign: Replicas are the wanted
// replicas, the first the preferred leader; nil cancels the partition's
// ongoing reassignment (KIP-455's null replicas).
type reassignTarget struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

func (t reassignTarget) name() string { return fmt.Sprintf("%s/%d", t.Topic, t.Partition) }

// reassignFile is kafka-reassign-partitions' JSON: what its --generate
// prints and its --execute reads, so plans move between the tools.
type reassignFile struct {
	Version    int `json:"version"`
	Partitions []struct {
		Topic     *string  `json:"topic"`
		Partition *int32   `json:"partition"`
		Replicas  []int32  `json:"replicas"`
		LogDirs   []string `json:"log_dirs"` // Strata has one log dir per broker: only "any" is accepted
	} `json:"partitions"`
}

// parseReassignFile reads a plan file. With cancel, replicas may be left
// out (they are ignored: every listed partition is cancelled).
func parseReassignFile(data []byte, cancel bool) ([]reassignTarget, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a misspelt "replica" must not read as a cancel
	var f reassignFile
	if err := dec.Decode(&f); err != nil {
		return nil, usageErrorf("plan file: %v", err)
	}
	if f.Version != 1 {
		return nil, usageErrorf("plan file: version %d, want 1", f.Version)
	}
	if len(f.Partitions) == 0 {
		return nil, usageErrorf("plan file: no partitions")
	}
	seen := map[string]bool{}
	var out []reassignTarget
	for i, p := range f.Partitions {
		if p.Topic == nil || *p.Topic == "" || p.Partition == nil || *p.Partition < 0 {
			return nil, usageErrorf("plan file: partitions[%d]: want a topic and a partition >= 0", i)
		}
		t := reassignTarget{Topic: *p.Topic, Partition: *p.Partition}
		if seen[t.name()] {
			return nil, usageErrorf("plan file: %s is listed twice", t.name())
		}
		seen[t.name()] = true
		for _, dir := range p.LogDirs {
			if dir != "any" {
				return nil, usageErrorf("plan file: %s: log dir %q: Strata brokers have one log dir, want \"any\"", t.name(), dir)
			}
		}
		if !cancel {
			if err := checkReplicas(p.Replicas); err != nil {
				return nil, usageErrorf("plan file: %s: %v", t.name(), err)
			}
			t.Replicas = p.Replicas
		}
		out = append(out, t)
	}
	return out, nil
}

// parseReplicaList reads --replicas "4,2,3".
func parseReplicaList(s string) ([]int32, error) {
	var out []int32
	for _, item := range splitList(s) {
		id, err := strconv.ParseInt(item, 10, 32)
		if err != nil {
			return nil, usageErrorf("--replicas %q: %q is not a broker id", s, item)
		}
		out = append(out, int32(id))
	}
	if err := checkReplicas(out); err != nil {
		return nil, usageErrorf("--replicas %q: %v", s, err)
	}
	return out, nil
}

// checkReplicas: at least one broker, none twice, no negative id.
func checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("want at least one replica")
	}
	seen := map[int32]bool{}
	for _, id := range replicas {
		if id < 0 {
			return fmt.Errorf("broker id %d is negative", id)
		}
		if seen[id] {
			return fmt.Errorf("broker %d is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

// clusterFromMetadata is the planner's input: the brokers Metadata lists
// (with racks) and every partition of every topic that loaded, except
// those of the diskless topics named in skip (they have no replicas to
// move: Metadata shows the broker that fronts them).
func clusterFromMetadata(md kadm.Metadata, skip map[string]bool) reassign.Cluster {
	var c reassign.Cluster
	for _, b := range md.Brokers {
		c.Brokers = append(c.Brokers, reassign.Broker{ID: b.NodeID, Rack: derefOr(b.Rack, "")})
	}
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil || skip[t.Topic] {
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			if len(p.Replicas) == 0 {
				continue // failed to load: nothing to plan from
			}
			c.Partitions = append(c.Partitions, reassign.Partition{Topic: t.Topic, Partition: p.Partition,
				Replicas: slices.Clone(p.Replicas), Leader: p.Leader})
		}
	}
	return c
}

// disklessTopics names the diskless topics (diskless.enable=true) among
// md's, from one DescribeConfigs of them all.
func disklessTopics(ctx context.Context, adm *kadm.Client, md kadm.Metadata) (map[string]bool, error) {
	names := md.Topics.Names()
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, err
	}
	for _, rc := range configs {
		if rc.Err != nil {
			continue // a topic deleted since the Metadata: nothing to plan either way
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == "diskless.enable" && cfg.MaybeValue() == "true" {
				out[rc.Name] = true
			}
		}
	}
	return out, nil
}

// planReport is a plan as `cluster balance` and `broker drain` show it:
// the moves, and each broker's load before and after them.
type planReport struct {
	Moves   []planMove   `json:"moves"`
	Brokers []brokerLoad `json:"brokers"`
}

type planMove struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// brokerLoad counts replicas and preferred leaderships (first replicas).
type brokerLoad struct {
	ID             int32   `json:"id"`
	Rack           *string `json:"rack"`
	ReplicasBefore int     `json:"replicas_before"`
	ReplicasAfter  int     `json:"replicas_after"`
	LeadersBefore  int     `json:"leaders_before"`
	LeadersAfter   int     `json:"leaders_after"`
}

func newPlanReport(c reassign.Cluster, moves []reassign.Move) planReport {
	r := planReport{Moves: []planMove{}, Brokers: []brokerLoad{}}
	for _, m := range moves {
		r.Moves = append(r.Moves, planMove{Topic: m.Topic, Partition: m.Partition, From: m.From, To: m.To})
	}
	after := map[int32]reassign.Load{}
	for _, l := range reassign.Loads(reassign.Apply(c, moves)) {
		after[l.Broker] = l
	}
	for _, l := range reassign.Loads(c) {
		b := brokerLoad{ID: l.Broker, ReplicasBefore: l.Replicas, LeadersBefore: l.Leaders,
			ReplicasAfter: after[l.Broker].Replicas, LeadersAfter: after[l.Broker].Leaders}
		if l.Rack != "" {
			b.Rack = &l.Rack
		}
		r.Brokers = append(r.Brokers, b)
	}
	return r
}

// targets are the moves as reassignments to submit.
func (r planReport) targets() []reassignTarget {
	var out []reassignTarget
	for _, m := range r.Moves {
		out = append(out, reassignTarget{Topic: m.Topic, Partition: m.Partition, Replicas: m.To})
	}
	return out
}

func printPlan(w io.Writer, r planReport) error {
	if len(r.Moves) == 0 {
		fmt.Fprintln(w, "no partitions to move")
	} else {
		fmt.Fprintf(w, "%d partitions to move:\n", len(r.Moves))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PARTITION\tFROM\tTO")
		for _, m := range r.Moves {
			fmt.Fprintf(tw, "  %s/%d\t%s\t%s\n", m.Topic, m.Partition, brokerList(m.From), brokerList(m.To))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "brokers (replicas, preferred leaderships):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  BROKER\tRACK\tREPLICAS\tLEADERS")
	for _, b := range r.Brokers {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", b.ID, derefOr(b.Rack, "-"), beforeAfter(b.ReplicasBefore, b.ReplicasAfter),
			beforeAfter(b.LeadersBefore, b.LeadersAfter))
	}
	return tw.Flush()
}

// beforeAfter is "12 → 9", or "9" when unchanged.
func beforeAfter(before, after int) string {
	if before == after {
		return strconv.Itoa(after)
	}
	return fmt.Sprintf("%d → %d", before, after)
}

// brokerList renders replicas as Kafka's tools do: 4,2,3 ("-" if none).
func brokerList(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}
