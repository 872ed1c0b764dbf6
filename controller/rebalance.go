package controller

import (
	"cmp"
	"fmt"
	"slices"
)

// DefaultImbalancePercentage is Kafka's leader.imbalance.per.broker.percentage.
const DefaultImbalancePercentage = 10

// Rebalance is Kafka's automatic preferred-leader election
// (auto.leader.rebalance.enable): after failovers, leadership piles up on
// the brokers that stayed up. For each broker, count the partitions whose
// preferred replica (first in assignment order) it is, and of those the
// ones it does not lead; when that share is above percent, every such
// partition whose preferred replica is serving and in the ISR, and whose
// current leader is properly elected (Plan has nothing to do for it), moves
// back to it with the leader epoch raised. Diskless topics have no
// preferred replica and are skipped. Pure; idempotent once applied.
func Rebalance(v View, percent int) []Change {
	live := liveness{}
	for _, b := range v.Brokers {
		live[b.NodeID] = b
	}
	type candidate struct {
		tv *TopicView
		p  int
	}
	preferred := map[int32]int{}
	moves := map[int32][]candidate{}
	for i := range v.Topics {
		tv := &v.Topics[i]
		if tv.Topic.Diskless() {
			continue
		}
		for p, st := range tv.States {
			if len(st.Replicas) == 0 {
				continue
			}
			want := st.Replicas[0]
			preferred[want]++
			if st.Leader != want && electionReason(st, live) == "" &&
				live.serving(want) && slices.Contains(st.ISR, want) {
				moves[want] = append(moves[want], candidate{tv, p})
			}
		}
	}
	var changes []Change
	for broker, list := range moves {
		if 100*len(list) <= percent*preferred[broker] {
			continue
		}
		for _, c := range list {
			st := c.tv.States[c.p]
			next := st
			next.ISR = slices.Clone(st.ISR)
			setLeader(&next, broker, live)
			changes = append(changes, Change{TopicID: c.tv.Topic.ID, Topic: c.tv.Topic.Name, Partition: int32(c.p),
				Old: st, New: next, Reason: fmt.Sprintf("preferred leader %d back in the ISR (%d of its %d preferred partitions led elsewhere)",
					broker, len(list), preferred[broker])})
		}
	}
	slices.SortFunc(changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return changes
}
