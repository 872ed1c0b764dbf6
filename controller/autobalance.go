package controller

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/strata-log/strata/reassign"
)

// DefaultAutoBalanceMaxMoves bounds the moves one auto-balance round
// begins: each copies a leader's hot tail, so a round stays a burst that
// live followers can share the leaders with.
const DefaultAutoBalanceMaxMoves = 10

// AutoBalance is one round of automatic balancing (serve --auto-balance):
// once the cluster is settled, it begins the first maxMoves moves of
// reassign.BalanceEachTopic over the serving brokers, the plan `strata
// cluster balance` submits. Settled means that no partition is being
// reassigned (the moves of the previous round are done, and an operator's
// own moves are left alone), Plan has nothing to do, and every replica is
// on a serving broker and in its partition's ISR: replacing a dead
// broker's replicas is the operator's call (`strata broker drain`), and
// moving partitions off a cluster that is catching up would slow it
// further. Draining brokers receive nothing.
//
// When it begins no move, waiting says why ("" when balanced). Pure; a
// balanced cluster gives nothing, and the next round plans again from
// what this one's moves made, so a round cut short by maxMoves only
// leaves the rest for later.
func AutoBalance(v View, maxMoves int, nowMs int64) (changes []Change, waiting string) {
	if why := unsettled(v); why != "" {
		return nil, why
	}
	cluster, where := balanceInput(v)
	moves := reassign.BalanceEachTopic(cluster)
	for _, m := range moves[:min(len(moves), maxMoves)] {
		at := where[topicPartition{m.Topic, m.Partition}]
		st := at.tv.States[at.p]
		next, err := Reassign(st, m.To, nowMs)
		if err != nil {
			continue // the planner names distinct brokers: not reached
		}
		changes = append(changes, Change{TopicID: at.tv.Topic.ID, Topic: m.Topic, Partition: m.Partition,
			Old: st, New: next, topic: at.tv.Topic,
			Reason: fmt.Sprintf("auto-balance: replicas %v→%v (move %d of %d planned)", m.From, m.To, len(changes)+1, len(moves))})
	}
	return changes, ""
}

type topicPartition struct {
	topic     string
	partition int32
}

// partitionAt locates a partition's state in a View.
type partitionAt struct {
	tv *TopicView
	p  int
}

// unsettled is why AutoBalance must wait, "" if it need not.
func unsettled(v View) string {
	live := livenessOf(v.Brokers)
	if changes := Plan(v); len(changes) > 0 {
		return fmt.Sprintf("%d partition changes pending, first %s", len(changes), changes[0])
	}
	for _, tv := range sortedTopics(v) {
		for p, st := range tv.States {
			name := fmt.Sprintf("%s/%d", tv.Topic.Name, p)
			switch {
			case st.Reassigning():
				return name + " is being reassigned"
			case len(st.ISR) < len(st.Replicas):
				return fmt.Sprintf("%s is under-replicated: ISR %v of replicas %v", name, st.ISR, st.Replicas)
			}
			for _, r := range st.Replicas {
				if !live.serving(r) {
					return fmt.Sprintf("broker %d, a replica of %s, is not serving", r, name)
				}
			}
		}
	}
	return ""
}

// balanceInput is the planner's Cluster: the serving brokers and every
// partition's replicas, with where each partition is in v.
func balanceInput(v View) (reassign.Cluster, map[topicPartition]partitionAt) {
	var c reassign.Cluster
	for _, b := range v.Brokers {
		if !b.Draining {
			c.Brokers = append(c.Brokers, reassign.Broker{ID: b.NodeID, Rack: b.Rack})
		}
	}
	slices.SortFunc(c.Brokers, func(a, b reassign.Broker) int { return cmp.Compare(a.ID, b.ID) })
	where := map[topicPartition]partitionAt{}
	for _, tv := range sortedTopics(v) {
		for p, st := range tv.States {
			c.Partitions = append(c.Partitions, reassign.Partition{Topic: tv.Topic.Name, Partition: int32(p),
				Replicas: slices.Clone(st.Replicas), Leader: st.Leader})
			where[topicPartition{tv.Topic.Name, int32(p)}] = partitionAt{tv, p}
		}
	}
	return c, where
}

// sortedTopics is v's topics by name (pointers into v.Topics, read only):
// the same View gives the same decision, whatever the order of v.Topics.
func sortedTopics(v View) []*TopicView {
	out := make([]*TopicView, 0, len(v.Topics))
	for i := range v.Topics {
		out = append(out, &v.Topics[i])
	}
	slices.SortFunc(out, func(a, b *TopicView) int { return cmp.Compare(a.Topic.Name, b.Topic.Name) })
	return out
}
