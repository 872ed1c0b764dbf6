package broker

// Cluster-level views the admin half answers with (Metadata, DescribeCluster,
// FindCoordinator) and the controlled shutdown (SIGTERM hands leadership
// over before the broker exits).

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/metadata"
)

// brokerView is the live brokers at one moment, for one response.
type brokerView struct {
	list []metadata.BrokerInfo
}

func (v brokerView) find(node int32) (metadata.BrokerInfo, bool) {
	i := slices.IndexFunc(v.list, func(info metadata.BrokerInfo) bool { return info.NodeID == node })
	if i < 0 {
		return metadata.BrokerInfo{}, false
	}
	return v.list[i], true
}

func (v brokerView) live(node int32) bool {
	_, ok := v.find(node)
	return ok
}

// leaderOf is the partition's serving leader, or -1: the state's leader
// must be live with the registration the controller elected (an initial
// state, or a leader that restarted since, has no leader until the
// controller writes a new state).
func (v brokerView) leaderOf(st metadata.PartitionState) int32 {
	if st.Leader < 0 {
		return -1
	}
	info, ok := v.find(st.Leader)
	if !ok || st.LeaderBrokerEpoch == 0 || (info.Epoch != 0 && info.Epoch != st.LeaderBrokerEpoch) {
		return -1
	}
	return st.Leader
}

// controllerID is the elected controller as last observed (this node
// before the controller started).
func controllerID(ctrl *controller.Controller, self int32) int32 {
	if ctrl == nil {
		return self
	}
	if id := ctrl.ID(); id >= 0 {
		return id
	}
	return -1
}

// ledWithSuccessor counts the partitions whose committed state names node
// leader, where another ISR member that is live could take over.
func (m *partitionManager) ledWithSuccessor(node int32, live func(node int32) bool) int {
	n := 0
	for _, t := range m.allTopics() {
		for _, st := range t.states {
			if st.Leader == node && slices.ContainsFunc(st.ISR, func(id int32) bool {
				return id != node && live(id)
			}) {
				n++
			}
		}
	}
	return n
}

// handOverLeadership is the controlled shutdown: mark the registration
// draining, so the controller moves every leadership with a live successor
// in the ISR to it and takes this broker out of ISRs, and wait for that,
// at most ControlledShutdownTimeout (or ctx). Partitions without a
// successor stay led here until the broker stops (Kafka does the same).
func (b *Broker) handOverLeadership(ctx context.Context) {
	reg := b.registration()
	if reg.Epoch == 0 || len(b.liveBrks.all()) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ControlledShutdownTimeout)
	defer cancel()
	if err := b.store.SetDraining(ctx, reg); err != nil {
		b.log.Warn("controlled shutdown: marking draining failed", "err", err)
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left := b.parts.ledWithSuccessor(b.cfg.NodeID, b.liveBrks.view().live)
		if left == 0 {
			b.log.Info("controlled shutdown: leadership handed over")
			return
		}
		select {
		case <-ctx.Done():
			b.log.Warn("controlled shutdown timed out; stopping with leaderships left", "partitions", left)
			return
		case <-tick.C:
		}
	}
}

// ownElectionWait bounds how long Start waits for the partitions this
// broker led before a restart to be led by it again (or by another
// replica). Longer than leaderElectionWait: after a crash the controller
// may itself be starting over (embedded etcd, a new session).
const ownElectionWait = 15 * time.Second

// leaderElectionWait bounds how long internal topic creation, restore and a
// CreatePartitions without a timeout wait for the controller to elect the
// new partitions' leaders.
const leaderElectionWait = 5 * time.Second

// awaitLeaders waits until every partition of the topic from index from on
// has an elected leader that live serves in this mirror, so a client that
// creates a topic can produce at once (Kafka answers CreateTopics after
// the controller set the leaders). It reports false if wait passes or ctx
// ends first: clients then see LEADER_NOT_AVAILABLE and retry.
func (m *partitionManager) awaitLeaders(ctx context.Context, id metadata.TopicID, from int, wait time.Duration, live *liveBrokers, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !m.leadersElected(id, from, live.view()) {
		select {
		case <-ctx.Done():
			log.Warn("partitions still without leaders; clients will retry", "topic_id", id.String())
			return false
		case <-tick.C:
		}
	}
	return true
}

// leadersElected: every partition of topic id from index from on has a
// leader that view serves (brokerView.leaderOf). A diskless topic has no
// elections to wait for: any broker serves it.
func (m *partitionManager) leadersElected(id metadata.TopicID, from int, view brokerView) bool {
	t, ok := m.topicByID(id)
	if ok && t.cfg.DisklessEnable {
		return true
	}
	if !ok || len(t.states) < len(t.topic.Replicas) {
		return false
	}
	for i := from; i < len(t.states); i++ {
		if view.leaderOf(t.states[i]) < 0 {
			return false
		}
	}
	return true
}

// controllerWait bounds how long Start waits to learn the elected
// controller (a fresh cluster elects in milliseconds; after a crash the
// old controller's session must expire first, and Start does not wait
// for that).
const controllerWait = 2 * time.Second

// awaitOwnElections waits, at most leaderElectionWait, until no partition
// state names this broker leader under an older registration: after a
// restart the controller re-elects this broker with a raised epoch (or
// elects another replica), and until then the partition has no leader. A
// broker that says it is serving should be usable at once, as a Kafka
// broker is after its log recovery, so Start waits for that.
func (b *Broker) awaitOwnElections(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ownElectionWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := b.parts.staleLeaderships(b.cfg.NodeID, b.registration().Epoch)
		if pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			b.log.Warn("partitions this broker led before its restart still wait for an election", "partitions", pending)
			return
		case <-tick.C:
		}
	}
}

// staleLeaderships counts states naming node leader with another
// registration epoch than epoch, and states naming it leader under epoch
// whose local replica does not lead yet (the state reached the
// mirror; the replica applies it right after).
func (m *partitionManager) staleLeaderships(node int32, epoch int64) int {
	n := 0
	for _, t := range m.allTopics() {
		for i, st := range t.states {
			if st.Leader != node {
				continue
			}
			if st.LeaderBrokerEpoch != epoch {
				n++
			} else if _, code := m.lookup(t.topic.Name, int32(i)); code != 0 {
				n++
			}
		}
	}
	return n
}
