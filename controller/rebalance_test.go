package controller

import (
	"testing"

	"github.com/strata-log/strata/metadata"
)

func rebalanceView(states ...metadata.PartitionState) View {
	brokers := []metadata.BrokerInfo{{NodeID: 1, Epoch: 11}, {NodeID: 2, Epoch: 12}, {NodeID: 3, Epoch: 13}}
	t := metadata.Topic{Name: "t", Replicas: make([][]int32, len(states))}
	for i, st := range states {
		t.Replicas[i] = st.Replicas
	}
	return View{Brokers: brokers, Topics: []TopicView{{Topic: t, States: states}}}
}

func led(leader int32, epoch int32, brokerEpoch int64, replicas, isr []int32) metadata.PartitionState {
	return metadata.PartitionState{Leader: leader, LeaderEpoch: epoch, LeaderBrokerEpoch: brokerEpoch,
		Replicas: replicas, ISR: isr, Version: 5}
}

func TestRebalanceMovesLeadershipBackToThePreferredReplica(t *testing.T) {
	v := rebalanceView(
		led(2, 3, 12, []int32{1, 2, 3}, []int32{1, 2, 3}), // 1 preferred, in ISR: moves
		led(2, 1, 12, []int32{2, 3, 1}, []int32{2, 3, 1}), // already preferred
		led(3, 4, 13, []int32{1, 3, 2}, []int32{3, 2}),    // 1 not in the ISR: stays
	)
	changes := Rebalance(v, DefaultImbalancePercentage)
	if len(changes) != 1 {
		t.Fatalf("changes %v, want one", changes)
	}
	c := changes[0]
	if c.Partition != 0 || c.New.Leader != 1 || c.New.LeaderEpoch != 4 || c.New.LeaderBrokerEpoch != 11 || c.New.Version != 5 {
		t.Fatalf("change %v (new %+v)", c, c.New)
	}
	// Applied, nothing is left to do, and Plan agrees the state is sound.
	v.Topics[0].States[0] = c.New
	if again := Rebalance(v, DefaultImbalancePercentage); len(again) != 0 {
		t.Fatalf("not idempotent: %v", again)
	}
	if plan := Plan(v); len(plan) != 0 {
		t.Fatalf("Plan disagrees with the rebalanced state: %v", plan)
	}
}

func TestRebalanceLeavesAloneWhatItMustNot(t *testing.T) {
	draining := rebalanceView(led(2, 3, 12, []int32{1, 2, 3}, []int32{1, 2, 3}))
	draining.Brokers[0].Draining = true
	dead := rebalanceView(led(2, 3, 12, []int32{1, 2, 3}, []int32{1, 2, 3}))
	dead.Brokers = dead.Brokers[1:]
	unelected := rebalanceView(led(2, 3, 99, []int32{1, 2, 3}, []int32{1, 2, 3})) // leader re-registered: Plan's job
	for name, v := range map[string]View{"draining": draining, "dead": dead, "unelected": unelected} {
		if changes := Rebalance(v, DefaultImbalancePercentage); len(changes) != 0 {
			t.Errorf("%s: %v, want none", name, changes)
		}
	}
}

func TestRebalanceHonoursTheImbalanceThreshold(t *testing.T) {
	// Broker 1 is preferred for 10 partitions and misses 1 (10%): not above
	// the 10% threshold, so nothing moves; missing 2 (20%) moves both.
	states := make([]metadata.PartitionState, 10)
	for i := range states {
		states[i] = led(1, 1, 11, []int32{1, 2, 3}, []int32{1, 2, 3})
	}
	states[0] = led(2, 2, 12, []int32{1, 2, 3}, []int32{1, 2, 3})
	if changes := Rebalance(rebalanceView(states...), DefaultImbalancePercentage); len(changes) != 0 {
		t.Fatalf("at 10%%: %v, want none", changes)
	}
	states[1] = led(3, 2, 13, []int32{1, 2, 3}, []int32{1, 2, 3})
	if changes := Rebalance(rebalanceView(states...), DefaultImbalancePercentage); len(changes) != 2 {
		t.Fatalf("at 20%%: %v, want two", changes)
	}
}
