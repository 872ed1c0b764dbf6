// Package controller elects one broker as the cluster's controller and,
// while elected, keeps every partition led: it picks leaders from the ISR
// when a leader dies, restarts or drains, raises the leader epoch at every
// leader change, and takes dead or draining brokers out of ISRs
// (DESIGN.md §4). It also places new partitions' replicas (Assign) and
// checks the placements clients ask for (PlaceTopic, PlaceAdded,
// CheckAssignment), for whichever broker answers CreateTopics or
// CreatePartitions.
//
// # Terms
//
//   - live broker: one registered in etcd (metadata.BrokerInfo under its
//     lease). Its Epoch is the registration's lease id: new at every
//     (re)registration. Serving: live and not Draining.
//   - LeaderBrokerEpoch: the Epoch of the leader's registration when the
//     controller elected it. A broker leads a partition only while
//     state.Leader is itself and state.LeaderBrokerEpoch is its current
//     registration Epoch (the broker checks this, not the controller).
//   - initial state: a partition whose state key was never written
//     (Version 0): leader = first replica, epoch 0, ISR = replicas,
//     LeaderBrokerEpoch 0, so nobody leads it until the controller writes
//     it (lazily: creating a topic writes no partition keys).
//
// # Election
//
// Every broker runs one candidate (Start). A candidate opens its own etcd
// session (a lease of Config.SessionTTL, default 10s; brokers pass their
// registration TTL when shorter) and campaigns with
// go.etcd.io/etcd/client/v3/concurrency under Store.ControllerPrefix(),
// value = its node id in decimal. The elected controller is the key with
// the lowest create revision under the prefix; every candidate observes it
// (a Get with WithFirstCreate, then a watch of the prefix; any change reads
// again) to answer ID(); -1 while unknown.
//
// A term ends when Close is called or the Start context ends (the
// candidate resigns and revokes its session lease so that another takes
// over at once), when the session is lost (lease expired or not renewed:
// the candidate stops acting, opens a new session and campaigns again), or
// when a write finds the election key gone (ErrFenced, below). Active()
// turns false before the key is deleted. Close returns within 5s even
// when etcd hangs (a campaign cancelled mid-wait resigns on the client's
// own context; that goroutine ends when the store closes).
//
// # While active: the CAS loop
//
//	Snapshot ──► view ◄── Watch(from Snapshot.Revision+1)
//	               │        TopicPut/TopicDeleted/PartitionPut: fold in (states only move to higher Versions)
//	               │        BrokersChanged: re-read the broker list before the next plan
//	               │        Resync: discard the view, Snapshot again
//	               ▼
//	  Plan(view) after a change (debounced Config.Debounce, 50ms) and every Config.ReplanInterval (2s)
//	               │
//	               ▼
//	  Store.CASPartitionStateGuarded(change.New, Version = change.Old.Version,
//	                                 guard = this term's election key and its create revision)
//	     ok            → the view takes the new state (its Version = the write's revision)
//	     ErrCASFailed  → someone else wrote (a leader shrinking or expanding its ISR): re-read the
//	                     topic's states (Store.PartitionStates) and plan again after the debounce
//	     ErrFenced     → the election key is gone: the term ends at once
//	     other errors  → logged; the periodic plan retries
//
// Initial states have Version 0, which CAS treats as "the key must not
// exist": the first write creates it, and a racing writer fails. The guard
// makes a deposed controller (whose session has not yet noticed the lost
// lease) unable to overwrite its successor's decisions; between two
// controllers' writes each CAS still compares the version it planned from.
// At most maxParallelWrites (8) writes are in flight.
//
// # Plan rules
//
// Plan(View) []Change is pure: the same View gives the same changes, in
// topic name then partition order. Per partition, with the assignment
// order of state.Replicas:
//
//  1. Election is needed when the leader is -1, not live, has
//     LeaderBrokerEpoch 0 (initial state), or a LeaderBrokerEpoch other
//     than its live Epoch (it restarted or re-registered), or is draining
//     while another ISR member is serving. The new leader is the first
//     replica that is in the ISR and serving; else one in the ISR that is
//     live though draining (it still serves until it exits: better than
//     offline); else, if the topic sets unclean.leader.election.enable
//     (metadata.ParseTopicConfig; unparsable configs count as off), the
//     first serving (then live) replica, and ISR = [it]; else -1. A
//     restarted leader is eligible again: re-electing it is a leader
//     change too. Every leader change (another broker, the same broker
//     with a new Epoch, or -1) raises LeaderEpoch by 1 and sets
//     LeaderBrokerEpoch to the new leader's Epoch (0 for -1), except the
//     first election of an initial state, which keeps LeaderEpoch 0 (a new
//     Kafka partition starts at leader epoch 0; nobody led epoch 0). An initial
//     state that would get leader -1 is left unwritten: it is leaderless
//     already.
//  2. ISR shrink: members that are not live or are draining leave the ISR,
//     except the (new) leader. The ISR never becomes empty: when every
//     member would go, the previous leader stays if it was a member, else
//     the first member — as KRaft keeps the last ISR member, the only one
//     that can later be elected cleanly. A shrink without a leader change
//     leaves LeaderEpoch alone (only Version moves).
//  3. Reassignment completion: a move whose adding replicas are all in
//     the ISR finishes (completeReassignment, reassign.go). Moving
//     leadership back to preferred replicas is not a Plan rule: Rebalance
//     runs every Config.RebalanceInterval.
//
// Diskless topics (diskless.enable=true, package diskless) are outside all
// of this: their partitions have no replicas, so the controller keeps no
// states for them, Plan and Rebalance skip them, and neither elections
// nor reassignments apply (the broker answers ELECTION_NOT_NEEDED and
// INVALID_REPLICA_ASSIGNMENT). Which broker clients are pointed at is
// diskless.Leader, computed by every broker alone.
//
// Idempotence: applying a plan's changes and planning again yields
// nothing (the elected leader is live with the recorded Epoch; every
// remaining ISR member is serving or the leader or the kept last member).
//
// Restart of a leader: the broker registers again with a new Epoch, so
// its old state has a mismatching LeaderBrokerEpoch and it does not lead.
// Rule 1 re-elects (usually itself, being first in the ISR) with
// LeaderEpoch+1, which the replication package requires before a
// restarted broker leads again (replication/doc.go, "Restart").
//
// # Auto-balance
//
// With Config.AutoBalanceInterval set (serve --auto-balance), the active
// controller runs a round at that interval, once Plan has nothing to do:
// AutoBalance (pure) waits while any partition is being reassigned, Plan
// has changes, or a replica is on a broker that is not serving or out of
// its ISR; otherwise it returns the first Config.AutoBalanceMaxMoves moves
// of reassign.BalanceEachTopic over the serving brokers as Reassign
// states. The shell writes them one at a time (CASAssignment compares the
// topic record's revision, which each write advances), then runs the
// preferred-leader Rebalance. A round's moves complete by Plan's rule 3;
// the next round plans again from what they made.
//
// # Placement (Assign)
//
// Kafka's AdminUtils placement with a fixed start: leaders round-robin
// over the brokers (rack-alternated order when racks are set), followers
// at a shift that grows every n partitions, and with racks a follower is
// skipped while its rack holds a replica and some rack holds none. See
// Assign.
//
// PlaceTopic and PlaceAdded refuse what cannot be placed (a partition
// count outside [1, max], a replication factor below 1 or above the live
// brokers), and CheckAssignment refuses a manual assignment whose
// partitions differ in replica count, repeat a replica, or name a broker
// that is not live. A refusal's text is the reason for the client; it
// wraps ErrInvalidPartitions, ErrInvalidReplicationFactor or
// ErrInvalidReplicaAssignment, which the broker maps to Kafka's codes.
package controller
