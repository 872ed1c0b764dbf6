package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-log/strata/metadata"
)

// View is everything Plan decides from: the registered (live) brokers and
// every topic with its partition states (stored or initial).
type View struct {
	// Brokers are the registered brokers; a broker not listed is dead.
	Brokers []metadata.BrokerInfo
	Topics  []TopicView
}

// TopicView is one topic and its partition states.
type TopicView struct {
	Topic metadata.Topic
	// States[p] is partition p's state; partitions without an entry (a
	// shorter slice) are not planned.
	States []metadata.PartitionState
}

// Change is one partition state write: New replaces Old, compared on
// Old.Version (New.Version == Old.Version, the CAS expectation).
type Change struct {
	TopicID   metadata.TopicID
	Topic     string
	Partition int32
	Old, New  metadata.PartitionState
	// Reason says why, for logs and golden tests.
	Reason string
	// topic is the topic record the change was planned from (the CAS base
	// of an assignment write).
	topic metadata.Topic
}

// ChangesAssignment reports whether the change moves replicas (a
// reassignment completing): it must then rewrite the topic's assignment
// of the partition with the state (metadata.CASAssignment).
func (c Change) ChangesAssignment() bool { return !slices.Equal(c.Old.Replicas, c.New.Replicas) }

// String renders a change on one line, e.g.
// "orders/0 v7: leader 1→2 epoch 3→4 (broker epoch 0→22) isr [1 2]→[2]: leader 1 not registered".
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d v%d:", c.Topic, c.Partition, c.Old.Version)
	if c.Old.Leader != c.New.Leader {
		fmt.Fprintf(&b, " leader %d→%d", c.Old.Leader, c.New.Leader)
	} else {
		fmt.Fprintf(&b, " leader %d", c.New.Leader)
	}
	if c.Old.LeaderEpoch != c.New.LeaderEpoch || c.Old.LeaderBrokerEpoch != c.New.LeaderBrokerEpoch {
		fmt.Fprintf(&b, " epoch %d→%d (broker epoch %d→%d)", c.Old.LeaderEpoch, c.New.LeaderEpoch,
			c.Old.LeaderBrokerEpoch, c.New.LeaderBrokerEpoch)
	}
	if !slices.Equal(c.Old.ISR, c.New.ISR) {
		fmt.Fprintf(&b, " isr %v→%v", c.Old.ISR, c.New.ISR)
	}
	if c.ChangesAssignment() {
		fmt.Fprintf(&b, " replicas %v→%v", c.Old.Replicas, c.New.Replicas)
	}
	fmt.Fprintf(&b, ": %s", c.Reason)
	return b.String()
}

// liveness is the registered brokers by node id.
type liveness map[int32]metadata.BrokerInfo

func (l liveness) live(id int32) bool { _, ok := l[id]; return ok }

// serving: registered and not draining.
func (l liveness) serving(id int32) bool { b, ok := l[id]; return ok && !b.Draining }

// Plan returns the partition state writes that keep every partition led
// (see doc.go, "Plan rules"), in topic name then partition order. It is
// pure and idempotent: once its changes are applied, Plan returns none.
// Diskless topics are skipped whatever their States hold: their
// partitions have no replicas and no state in etcd.
func Plan(v View) []Change {
	live := liveness{}
	for _, b := range v.Brokers {
		live[b.NodeID] = b
	}
	topics := slices.Clone(v.Topics)
	slices.SortFunc(topics, func(a, b TopicView) int { return cmp.Compare(a.Topic.Name, b.Topic.Name) })
	var changes []Change
	for _, tv := range topics {
		if tv.Topic.Diskless() {
			continue // no replicas, no states, no leader to elect
		}
		unclean := uncleanElection(tv.Topic)
		for p, st := range tv.States {
			next, reason, changed := planPartition(st, live, unclean)
			if changed {
				changes = append(changes, Change{TopicID: tv.Topic.ID, Topic: tv.Topic.Name,
					Partition: int32(p), Old: st, New: next, Reason: reason, topic: tv.Topic})
			}
		}
	}
	return changes
}

// uncleanElection reads unclean.leader.election.enable; a topic whose
// configs do not parse keeps the safe default (off).
func uncleanElection(t metadata.Topic) bool {
	cfg, err := metadata.ParseTopicConfig(t.Configs)
	return err == nil && cfg.UncleanLeaderElection
}

// planPartition applies rule 1 (leader election) then rule 2 (ISR shrink)
// to one state; changed reports whether the result differs.
func planPartition(st metadata.PartitionState, live liveness, unclean bool) (metadata.PartitionState, string, bool) {
	if len(st.Replicas) == 0 {
		return st, "", false
	}
	next := st
	next.ISR = slices.Clone(st.ISR)
	var reasons []string
	if why := electionReason(st, live); why != "" {
		leader, isr, how := elect(st, live, unclean)
		if st.Version == 0 && leader < 0 {
			// An initial state is already leaderless (LeaderBrokerEpoch 0):
			// writing Leader -1 would only burn an epoch.
			return st, "", false
		}
		setLeader(&next, leader, live)
		if isr != nil {
			next.ISR = isr
		}
		reasons = append(reasons, why+"; "+how)
	}
	if isr, removed := shrinkISR(next, st.Leader, live); len(removed) > 0 {
		next.ISR = isr
		reasons = append(reasons, fmt.Sprintf("isr drops %v (not registered or draining)", removed))
	}
	if done, why, ok := completeReassignment(next, live); ok {
		next = done
		reasons = append(reasons, why)
	}
	if sameState(st, next) {
		return st, "", false
	}
	return next, strings.Join(reasons, "; "), true
}

// electionReason is why st needs an election, "" if it does not.
func electionReason(st metadata.PartitionState, live liveness) string {
	leader := st.Leader
	info, registered := live[leader]
	switch {
	case leader < 0:
		return "no leader"
	case !registered:
		return fmt.Sprintf("leader %d not registered", leader)
	case st.LeaderBrokerEpoch == 0:
		return fmt.Sprintf("leader %d never elected (initial state)", leader)
	case info.Epoch != st.LeaderBrokerEpoch:
		return fmt.Sprintf("leader %d re-registered", leader)
	case info.Draining && slices.ContainsFunc(st.ISR, func(id int32) bool { return id != leader && live.serving(id) }):
		return fmt.Sprintf("leader %d draining", leader)
	}
	return ""
}

// elect picks the new leader: the first replica (assignment order) in the
// ISR that is serving, else one in the ISR that is live but draining (a
// draining broker still serves until it exits: better than offline), else
// with unclean election the first serving (then live) replica with
// ISR = [it]; else -1. isr is nil when the ISR is not replaced.
func elect(st metadata.PartitionState, live liveness, unclean bool) (leader int32, isr []int32, how string) {
	inISR := func(id int32) bool { return slices.Contains(st.ISR, id) }
	for _, ok := range []func(int32) bool{live.serving, live.live} {
		for _, r := range st.Replicas {
			if inISR(r) && ok(r) {
				return r, nil, fmt.Sprintf("elected %d from the ISR", r)
			}
		}
	}
	if unclean {
		for _, ok := range []func(int32) bool{live.serving, live.live} {
			for _, r := range st.Replicas {
				if ok(r) {
					return r, []int32{r}, fmt.Sprintf("unclean election of %d", r)
				}
			}
		}
	}
	return -1, nil, "no eligible replica"
}

// setLeader records a leader change: every change of leader or of its
// registration raises the leader epoch, except the first claim of an
// initial state (Version 0: never written, so never led), which keeps epoch
// 0 as a new Kafka partition does.
func setLeader(st *metadata.PartitionState, leader int32, live liveness) {
	brokerEpoch := int64(0)
	if leader >= 0 {
		brokerEpoch = live[leader].Epoch
	}
	if leader == st.Leader && brokerEpoch == st.LeaderBrokerEpoch {
		return
	}
	firstClaim := st.Version == 0 && st.LeaderBrokerEpoch == 0
	st.Leader, st.LeaderBrokerEpoch = leader, brokerEpoch
	if !firstClaim {
		st.LeaderEpoch++
	}
}

// shrinkISR drops dead and draining members except the (new) leader. The
// ISR never becomes empty: if every member would go, the previous leader
// stays when it was a member, else the first member (KRaft keeps the last
// ISR member so that it, and only it, can be elected cleanly later).
func shrinkISR(st metadata.PartitionState, oldLeader int32, live liveness) (isr, removed []int32) {
	for _, id := range st.ISR {
		if id == st.Leader || live.serving(id) {
			isr = append(isr, id)
		} else {
			removed = append(removed, id)
		}
	}
	if len(isr) == 0 && len(st.ISR) > 0 {
		keep := st.ISR[0]
		if slices.Contains(st.ISR, oldLeader) {
			keep = oldLeader
		}
		isr = []int32{keep}
		removed = slices.DeleteFunc(removed, func(id int32) bool { return id == keep })
	}
	return isr, removed
}

func sameState(a, b metadata.PartitionState) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		a.LeaderBrokerEpoch == b.LeaderBrokerEpoch && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.Replicas, b.Replicas)
}
