package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

func testLogger() *slog.Logger {
	if os.Getenv("CONTROLLER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openStore(t *testing.T, endpoints []string, cluster string) *metadata.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: cluster, Logger: testLogger()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startCandidate(t *testing.T, s *metadata.Store, id int32) *Controller {
	t.Helper()
	c, err := Start(context.Background(), Config{NodeID: id, Store: s, SessionTTL: 2 * time.Second, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// register registers a broker; cancel ends (revokes) the registration.
func register(t *testing.T, s *metadata.Store, id int32) (metadata.Registration, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg, err := s.RegisterBroker(ctx, metadata.BrokerInfo{NodeID: id, Host: "127.0.0.1", Port: 9000 + id}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return reg, cancel
}

// waitState waits until partition 0 of the topic matches want.
func waitState(t *testing.T, s *metadata.Store, id metadata.TopicID, what string, want func(metadata.PartitionState) bool) metadata.PartitionState {
	t.Helper()
	var last metadata.PartitionState
	deadline := time.Now().Add(20 * time.Second)
	for {
		states, err := s.PartitionStates(context.Background(), id)
		if err == nil {
			last = states[0]
			if want(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state %+v (err %v)", what, last, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// activeOf waits until exactly one candidate is active and every open one
// observes it; returns its index.
func activeOf(t *testing.T, candidates ...*Controller) int {
	t.Helper()
	index := -1
	testkit.WaitFor(t, 20*time.Second, "one active controller observed by all", func() bool {
		index = -1
		for i, c := range candidates {
			if c.Active() {
				if index >= 0 {
					return false
				}
				index = i
			}
		}
		if index < 0 {
			return false
		}
		for _, c := range candidates {
			if c.ID() != candidates[index].cfg.NodeID {
				return false
			}
		}
		return true
	})
	return index
}

func TestControllerEmbedded(t *testing.T) { runControllerScenario(t, metadatatest.StartEmbedded(t)) }

func TestControllerExternal(t *testing.T) { runControllerScenario(t, metadatatest.StartExternal(t)) }

// runControllerScenario: election, first election of a partition, failover
// on a revoked registration, re-election of a restarted leader, hand-over
// on Close, and acting again after the session is lost.
func runControllerScenario(t *testing.T, endpoints []string) {
	cluster := fmt.Sprintf("ctrl-%d", time.Now().UnixNano())
	admin := openStore(t, endpoints, cluster)
	candidates := []*Controller{
		startCandidate(t, openStore(t, endpoints, cluster), 1),
		startCandidate(t, openStore(t, endpoints, cluster), 2),
	}
	for _, c := range candidates {
		if !c.WaitKnown(context.Background()) || c.ID() < 0 {
			t.Fatalf("candidate %d: no controller known", c.cfg.NodeID)
		}
	}
	first := activeOf(t, candidates...)

	reg1, revoke1 := register(t, admin, 1)
	reg2, _ := register(t, admin, 2)
	topic, err := admin.CreateTopic(context.Background(), metadata.CreateTopicRequest{Name: "orders", Replicas: [][]int32{{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, topic.ID, "broker 1 elected with its epoch", func(st metadata.PartitionState) bool {
		return st.Leader == 1 && st.LeaderBrokerEpoch == reg1.Epoch && st.LeaderEpoch == 0 && slices.Equal(st.ISR, []int32{1, 2})
	})

	revoke1()
	waitState(t, admin, topic.ID, "failover to broker 2", func(st metadata.PartitionState) bool {
		return st.Leader == 2 && st.LeaderBrokerEpoch == reg2.Epoch && st.LeaderEpoch == 1 && slices.Equal(st.ISR, []int32{2})
	})

	restarted, _ := register(t, admin, 2) // a restart: a new registration replaces the old
	waitState(t, admin, topic.ID, "restarted leader re-elected with a raised epoch", func(st metadata.PartitionState) bool {
		return st.Leader == 2 && st.LeaderBrokerEpoch == restarted.Epoch && st.LeaderEpoch == 2
	})

	candidates[first].Close()
	other := 1 - first
	if candidates[first].Active() {
		t.Fatal("closed controller still active")
	}
	activeOf(t, candidates[other])
	again, _ := register(t, admin, 2)
	waitState(t, admin, topic.ID, "the new controller acts", func(st metadata.PartitionState) bool {
		return st.Leader == 2 && st.LeaderBrokerEpoch == again.Epoch && st.LeaderEpoch == 3
	})

	testSessionLoss(t, admin, candidates[other], topic.ID)
}

// testSessionLoss revokes the active controller's session lease: it stops
// acting, campaigns again with a new session and, alone, is elected again
// and acts.
func testSessionLoss(t *testing.T, admin *metadata.Store, c *Controller, id metadata.TopicID) {
	ctx := context.Background()
	resp, err := admin.Client().Get(ctx, admin.ControllerPrefix(), clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("election key: %v, %v", resp, err)
	}
	oldLease, oldKey := resp.Kvs[0].Lease, string(resp.Kvs[0].Key)
	if _, err := admin.Client().Revoke(ctx, clientv3.LeaseID(oldLease)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "re-elected with a new session", func() bool {
		r, err := admin.Client().Get(ctx, admin.ControllerPrefix(), clientv3.WithFirstCreate()...)
		return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Key) != oldKey && c.Active()
	})
	reg, _ := register(t, admin, 2)
	waitState(t, admin, id, "acting after the session loss", func(st metadata.PartitionState) bool {
		return st.Leader == 2 && st.LeaderBrokerEpoch == reg.Epoch && st.LeaderEpoch == 4
	})
}

// TestControllerDrainAndUnclean: a draining leader hands over to a serving
// ISR member; with every ISR member gone an unclean topic elects a live
// replica while a clean one goes leaderless.
func TestControllerDrainAndUnclean(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	admin := openStore(t, endpoints, "drain")
	c := startCandidate(t, openStore(t, endpoints, "drain"), 1)
	activeOf(t, c)
	ctx := context.Background()
	reg1, revoke1 := register(t, admin, 1)
	reg2, _ := register(t, admin, 2)
	clean, err := admin.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "clean", Replicas: [][]int32{{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, clean.ID, "broker 1 leads", func(st metadata.PartitionState) bool {
		return st.Leader == 1 && st.LeaderBrokerEpoch == reg1.Epoch && st.LeaderEpoch == 0
	})
	if err := admin.SetDraining(ctx, reg1); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, clean.ID, "leadership leaves the draining broker", func(st metadata.PartitionState) bool {
		return st.Leader == 2 && st.LeaderBrokerEpoch == reg2.Epoch && st.LeaderEpoch == 1 && slices.Equal(st.ISR, []int32{2})
	})
	revoke1()
	register(t, admin, 3)
	// ISR [2] only; broker 2 leaves next. "loose" has replica 3 out of its ISR.
	loose, err := admin.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "loose", Replicas: [][]int32{{2, 3}},
		Configs: map[string]string{"unclean.leader.election.enable": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, loose.ID, "broker 2 leads loose", func(st metadata.PartitionState) bool { return st.Leader == 2 })
	// The leader shrinks its ISR (as a lagging follower would make it);
	// retried if it races the controller.
	waitState(t, admin, loose.ID, "loose ISR shrunk to [2]", func(st metadata.PartitionState) bool {
		if slices.Equal(st.ISR, []int32{2}) {
			return true
		}
		st.ISR = []int32{2}
		if _, err := admin.CASPartitionState(ctx, loose.ID, 0, st); err != nil && !errors.Is(err, metadata.ErrCASFailed) {
			t.Fatal(err)
		}
		return false
	})
	admin.Close() // ends every registration made through it: 2 and 3 both go
	checker := openStore(t, endpoints, "drain")
	waitState(t, checker, clean.ID, "clean topic leaderless", func(st metadata.PartitionState) bool {
		return st.Leader == -1 && st.LeaderEpoch == 2 && slices.Equal(st.ISR, []int32{2})
	})
	reg3b, _ := register(t, checker, 3)
	waitState(t, checker, loose.ID, "unclean election of broker 3", func(st metadata.PartitionState) bool {
		return st.Leader == 3 && st.LeaderBrokerEpoch == reg3b.Epoch && slices.Equal(st.ISR, []int32{3})
	})
}

// TestControllerEtcdUnreachable: with etcd hung, the active controller
// stops acting once its session cannot be renewed, and Close returns in
// bounded time on every candidate.
func TestControllerEtcdUnreachable(t *testing.T) {
	etcd := metadatatest.StartExternalProcess(t)
	a := startCandidate(t, openStore(t, etcd.Endpoints, "hung"), 1)
	b := startCandidate(t, openStore(t, etcd.Endpoints, "hung"), 2)
	active := []*Controller{a, b}[activeOf(t, a, b)]
	if err := etcd.Pause(); err != nil {
		t.Fatal(err)
	}
	defer etcd.Resume()
	testkit.WaitFor(t, 20*time.Second, "the active controller to stop acting", func() bool { return !active.Active() })
	for _, c := range []*Controller{a, b} {
		start := time.Now()
		c.Close()
		if took := time.Since(start); took > closeWait+2*time.Second {
			t.Fatalf("Close took %v with etcd hung", took)
		}
	}
}

// TestRestartedCandidateRevokesItsStaleCandidacy: a broker killed while
// controller leaves its election key behind until its session expires. The
// same node id starting again must not wait for that (a restarted single
// node would have no controller, so no leaders, for a whole session TTL):
// it revokes the dead incarnation's session and is elected at once. The
// stale session here lives 60 s; the wait for the new one is 20 s at most.
func TestRestartedCandidateRevokesItsStaleCandidacy(t *testing.T) {
	s := openStore(t, metadatatest.StartEmbedded(t), "stale")
	stale, err := concurrency.NewSession(s.Client(), concurrency.WithTTL(60))
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := concurrency.NewElection(stale, s.ControllerPrefix()).Campaign(ctx, "1"); err != nil {
		t.Fatalf("stale campaign: %v", err)
	}
	c := startCandidate(t, s, 1)
	testkit.WaitFor(t, 20*time.Second, "the restarted node elected despite its stale candidacy", c.Active)
	ttl, err := s.Client().TimeToLive(context.Background(), stale.Lease())
	if err != nil || ttl.TTL > 0 {
		t.Fatalf("the stale session's lease is still alive: %+v, %v", ttl, err)
	}
	// Another node's candidacy is never revoked.
	other := startCandidate(t, s, 2)
	time.Sleep(500 * time.Millisecond)
	if !c.Active() || other.Active() {
		t.Fatalf("after a second candidate: node 1 active %v, node 2 active %v", c.Active(), other.Active())
	}
}

// WaitKnown gives up when its context ends while no controller is known.
func TestWaitKnownEndsWithItsContext(t *testing.T) {
	c := &Controller{}
	c.observed.Store(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if c.WaitKnown(ctx) {
		t.Fatal("WaitKnown reported a controller while none was known")
	}
	c.observed.Store(3)
	if !c.WaitKnown(context.Background()) {
		t.Fatal("WaitKnown missed the known controller")
	}
}
