package controller

import (
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/metadata"
)

// Partition reassignment (KIP-455). A move of a partition from replicas R
// to a target T is three states of its record, each one compare-and-swap
// of the topic's assignment and the partition state together
// (metadata.CASAssignment), so a controller that dies between two steps
// leaves a state the next one finishes:
//
//  1. Begin (Reassign, by the broker that received
//     AlterPartitionReassignments): Replicas = T followed by R∖T,
//     AddingReplicas = T∖R, RemovingReplicas = R∖T. Brokers host what the
//     assignment names, so the adding ones open an empty log and follow the
//     leader from its local log start: only the hot tail is copied, the
//     history stays in the bucket.
//  2. Catch up: the leader adds each adding replica to the ISR once it
//     reaches the high watermark (the ordinary ISR rule).
//  3. Complete (completeReassignment, a Plan rule): once every adding
//     replica is in the ISR, Replicas = T, ISR = ISR∩T, and when the leader
//     is leaving, leadership passes to the first replica of T in the ISR
//     (the epoch is raised, as for any leader change). Leaving replicas drop
//     their local copy when they see the assignment without them.
//
// A cancel (a null target) restores R the same way at once: replicas being
// added leave, and a leader among them is replaced by election.

// Reassignment refusals (the broker maps each to a Kafka error code).
var (
	ErrNoReassignment      = errors.New("controller: no reassignment in progress")
	ErrInvalidReassignment = errors.New("controller: invalid reassignment")
)

// Reassign returns st with a reassignment to target begun, or with the
// running one changed to target (KIP-455 allows a new target while one
// runs: the original replicas stay the base). A nil target cancels the
// running one. A target equal to the original replicas in the same order
// is a cancel too; in another order it only changes the preferred leader.
// nowMs stamps a move that begins (metadata.PartitionState.ReassignStartMs).
func Reassign(st metadata.PartitionState, target []int32, nowMs int64) (metadata.PartitionState, error) {
	original := st.OriginalReplicas()
	if target == nil {
		if !st.Reassigning() {
			return st, ErrNoReassignment
		}
		target = original
	}
	if err := checkTarget(target); err != nil {
		return st, err
	}
	next := st
	next.Replicas = slices.Clone(target)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	for _, r := range target {
		if !slices.Contains(original, r) {
			next.AddingReplicas = append(next.AddingReplicas, r)
		}
	}
	for _, r := range original {
		if !slices.Contains(target, r) {
			next.Replicas = append(next.Replicas, r)
			next.RemovingReplicas = append(next.RemovingReplicas, r)
		}
	}
	switch {
	case !next.Reassigning():
		next.ReassignStartMs = 0
	case !st.Reassigning():
		next.ReassignStartMs = nowMs
	}
	next.ISR = intersect(st.ISR, next.Replicas)
	if !slices.Contains(next.Replicas, st.Leader) || len(next.ISR) == 0 {
		// The leader was a replica being added that this change drops:
		// leaderless until Plan elects from the ISR (raising the epoch).
		next.Leader, next.LeaderBrokerEpoch = -1, 0
		next.LeaderEpoch++
		if len(next.ISR) == 0 {
			next.ISR = []int32{next.Replicas[0]}
		}
	}
	return next, nil
}

func checkTarget(target []int32) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: an empty replica list", ErrInvalidReassignment)
	}
	for i, r := range target {
		if r < 0 {
			return fmt.Errorf("%w: broker id %d", ErrInvalidReassignment, r)
		}
		if slices.Contains(target[:i], r) {
			return fmt.Errorf("%w: broker %d listed twice", ErrInvalidReassignment, r)
		}
	}
	return nil
}

// completeReassignment is Plan's rule 3: a reassignment whose adding
// replicas are all in the ISR finishes (see the comment at the top). It
// waits while the target has no ISR member, or while the leader must move
// and no target replica in the ISR is serving.
func completeReassignment(st metadata.PartitionState, live liveness) (metadata.PartitionState, string, bool) {
	if !st.Reassigning() || st.Leader < 0 {
		return st, "", false
	}
	for _, r := range st.AddingReplicas {
		if !slices.Contains(st.ISR, r) {
			return st, "", false
		}
	}
	target := st.TargetReplicas()
	isr := intersect(st.ISR, target)
	if len(isr) == 0 {
		return st, "", false
	}
	next := st
	next.Replicas, next.ISR = target, isr
	next.AddingReplicas, next.RemovingReplicas, next.ReassignStartMs = nil, nil, 0
	if !slices.Contains(target, st.Leader) {
		leader := int32(-1)
		for _, r := range target {
			if slices.Contains(isr, r) && live.serving(r) {
				leader = r
				break
			}
		}
		if leader < 0 {
			return st, "", false
		}
		setLeader(&next, leader, live)
	}
	return next, fmt.Sprintf("reassignment done: replicas %v→%v", st.Replicas, target), true
}

// intersect is the members of a also in b, in a's order.
func intersect(a, b []int32) []int32 {
	out := []int32{}
	for _, id := range a {
		if slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}
