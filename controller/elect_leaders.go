package controller

import (
	"errors"
	"slices"

	"github.com/strata-log/strata/metadata"
)

// Errors of an administrator's election (Kafka's ElectLeaders), mapped by
// the broker to Kafka's codes.
var (
	// ErrElectionNotNeeded: the wanted leader leads already.
	ErrElectionNotNeeded = errors.New("controller: election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not serving
	// or not in the ISR.
	ErrPreferredLeaderNotAvailable = errors.New("controller: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no replica may lead.
	ErrEligibleLeadersNotAvailable = errors.New("controller: no eligible leader available")
)

// ElectPreferred is ElectLeaders with the PREFERRED type: leadership moves
// to the first replica in assignment order, if it is serving and in the
// ISR, with the leader epoch raised. Pure: the caller writes the result
// with a compare-and-swap on st's version.
func ElectPreferred(st metadata.PartitionState, brokers []metadata.BrokerInfo) (metadata.PartitionState, error) {
	if len(st.Replicas) == 0 {
		return st, ErrPreferredLeaderNotAvailable
	}
	live := livenessOf(brokers)
	want := st.Replicas[0]
	if st.Leader == want && electionReason(st, live) == "" {
		return st, ErrElectionNotNeeded
	}
	if !live.serving(want) || !slices.Contains(st.ISR, want) {
		return st, ErrPreferredLeaderNotAvailable
	}
	next := st
	next.ISR = slices.Clone(st.ISR)
	setLeader(&next, want, live)
	return next, nil
}

// ElectUnclean is ElectLeaders with the UNCLEAN type: a partition with a
// properly elected leader needs nothing; otherwise the first serving (then
// live) replica in the ISR leads, else the first serving (then live)
// replica at all, with ISR = [it], accepting the loss of what only the old
// ISR had. Pure, as ElectPreferred.
func ElectUnclean(st metadata.PartitionState, brokers []metadata.BrokerInfo) (metadata.PartitionState, error) {
	live := livenessOf(brokers)
	if st.Leader >= 0 && electionReason(st, live) == "" {
		return st, ErrElectionNotNeeded
	}
	leader, isr, _ := elect(st, live, true)
	if leader < 0 {
		return st, ErrEligibleLeadersNotAvailable
	}
	next := st
	next.ISR = slices.Clone(st.ISR)
	setLeader(&next, leader, live)
	if isr != nil {
		next.ISR = isr
	}
	return next, nil
}

func livenessOf(brokers []metadata.BrokerInfo) liveness {
	live := make(liveness, len(brokers))
	for _, b := range brokers {
		live[b.NodeID] = b
	}
	return live
}
