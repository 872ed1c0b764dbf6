package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// storeCase runs against a fresh cluster prefix on a shared server.
type storeCase struct {
	name string
	run  func(t *testing.T, env *env)
}

// env is one test's view: a store on its own cluster prefix, and a way to
// open more stores on the same prefix.
type env struct {
	endpoints []string
	cluster   string
	store     *metadata.Store
}

func (e *env) open(t *testing.T) *metadata.Store {
	t.Helper()
	return openStore(t, e.endpoints, e.cluster)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openStore(t *testing.T, endpoints []string, cluster string) *metadata.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := quietLogger()
	if os.Getenv("METADATA_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: cluster, Logger: logger})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var storeCases = []storeCase{
	{"ClusterID", testClusterID},
	{"TopicLifecycle", testTopicLifecycle},
	{"InvalidTopics", testInvalidTopics},
	{"AlterConfigsConflict", testAlterConfigsConflict},
	{"AddPartitions", testAddPartitions},
	{"PartitionCAS", testPartitionCAS},
	{"GuardedPartitionCAS", testGuardedPartitionCAS},
	{"BrokerLease", testBrokerLease},
	{"Registrar", testRegistrar},
	{"Watch", testWatch},
	{"WatchCompacted", testWatchCompacted},
	{"ProducerIDs", testProducerIDs},
	{"TopicIDKnown", testTopicIDKnown},
	{"DisklessTopic", testDisklessTopic},
}

func runStoreCases(t *testing.T, endpoints []string) {
	for i, c := range storeCases {
		t.Run(c.name, func(t *testing.T) {
			cluster := fmt.Sprintf("c%d-%d", i, time.Now().UnixNano())
			c.run(t, &env{endpoints: endpoints, cluster: cluster, store: openStore(t, endpoints, cluster)})
		})
	}
}

func TestStoreEmbedded(t *testing.T) { runStoreCases(t, metadatatest.StartEmbedded(t)) }

func TestStoreExternal(t *testing.T) { runStoreCases(t, metadatatest.StartExternal(t)) }

func testClusterID(t *testing.T, e *env) {
	ctx := testCtx(t)
	id1, err := e.store.ClusterID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(id1) != 22 {
		t.Fatalf("cluster id %q: want 22 characters", id1)
	}
	id2, err := e.open(t).ClusterID(ctx)
	if err != nil || id2 != id1 {
		t.Fatalf("second store: id %q err %v, want %q", id2, err, id1)
	}
	other, err := openStore(t, e.endpoints, e.cluster+"-other").ClusterID(ctx)
	if err != nil || other == id1 {
		t.Fatalf("other cluster: id %q err %v, want a different id", other, err)
	}
}

func testTopicLifecycle(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	req := metadata.CreateTopicRequest{
		Name:     "orders",
		Replicas: [][]int32{{1, 2}, {2, 1}, {1, 2}},
		Configs:  map[string]string{"retention.ms": "1000"},
	}
	created, err := s.CreateTopic(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID.IsZero() || created.Revision == 0 {
		t.Fatalf("created %+v: want an id and a revision", created)
	}
	if _, err := s.CreateTopic(ctx, req); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	got, err := s.Topic(ctx, "orders")
	if err != nil || got.ID != created.ID || got.Configs["retention.ms"] != "1000" || len(got.Replicas) != 3 {
		t.Fatalf("read back %+v, %v", got, err)
	}
	states, err := s.PartitionStates(ctx, created.ID)
	if err != nil || len(states) != 3 {
		t.Fatalf("states %+v, %v", states, err)
	}
	if st := states[1]; st.Leader != 2 || st.LeaderEpoch != 0 || !slices.Equal(st.ISR, []int32{2, 1}) || st.Version != 0 {
		t.Fatalf("initial state %+v", st)
	}
	if _, err := s.CASPartitionState(ctx, created.ID, 0, metadata.PartitionState{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Topic(ctx, "orders"); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("after delete: %v, want ErrTopicNotFound", err)
	}
	if _, err := s.PartitionStates(ctx, created.ID); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("states after delete: %v, want ErrTopicNotFound", err)
	}
	if err := s.DeleteTopic(ctx, "orders"); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("second delete: %v, want ErrTopicNotFound", err)
	}
	again, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "orders", Replicas: [][]int32{{1}}})
	if err != nil || again.ID == created.ID {
		t.Fatalf("recreate: %+v, %v: want a new id", again, err)
	}
	states, err = s.PartitionStates(ctx, again.ID)
	if err != nil || len(states) != 1 || states[0].LeaderEpoch != 0 || states[0].Version != 0 {
		t.Fatalf("recreated states %+v, %v: want a fresh initial state", states, err)
	}
	topics, err := s.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].ID != again.ID || len(topics[0].Configs) != 0 {
		t.Fatalf("topics %+v, %v", topics, err)
	}
}

func testInvalidTopics(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	cases := []struct {
		req  metadata.CreateTopicRequest
		want error
	}{
		{metadata.CreateTopicRequest{Name: "a/b", Replicas: [][]int32{{1}}}, metadata.ErrInvalidTopic},
		{metadata.CreateTopicRequest{Name: "..", Replicas: [][]int32{{1}}}, metadata.ErrInvalidTopic},
		{metadata.CreateTopicRequest{Name: "t", Replicas: nil}, metadata.ErrInvalidPartitions},
		{metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1, 1}}}, metadata.ErrInvalidReplicas},
		{metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{}}}, metadata.ErrInvalidReplicas},
		{metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}}, Configs: map[string]string{"retention.ms": "x"}}, metadata.ErrInvalidConfig},
		{metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}}, Configs: map[string]string{"no.such": "1"}}, metadata.ErrInvalidConfig},
	}
	for _, c := range cases {
		if _, err := s.CreateTopic(ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("create %+v: %v, want %v", c.req, err, c.want)
		}
	}
	if topics, err := s.Topics(ctx); err != nil || len(topics) != 0 {
		t.Fatalf("topics after invalid creates: %+v, %v", topics, err)
	}
}

func testAlterConfigsConflict(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	if _, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}}}); err != nil {
		t.Fatal(err)
	}
	// Deterministic conflict: the first attempt's mutate lets another
	// writer in, so its CAS fails and the loop must retry on the new value.
	other := e.open(t)
	var calls atomic.Int32
	got, err := s.AlterTopicConfigs(ctx, "t", func(c map[string]string) error {
		if calls.Add(1) == 1 {
			if _, err := other.AlterTopicConfigs(ctx, "t", func(c map[string]string) error {
				c["retention.ms"] = "5000"
				return nil
			}); err != nil {
				return err
			}
		}
		c["segment.ms"] = "60000"
		return nil
	})
	if err != nil || calls.Load() != 2 {
		t.Fatalf("alter: %v after %d calls, want success after 2", err, calls.Load())
	}
	if got.Configs["retention.ms"] != "5000" || got.Configs["segment.ms"] != "60000" {
		t.Fatalf("configs %v: both writes must land", got.Configs)
	}
	// Concurrent alters of different keys all land.
	names := []string{"retention.bytes", "min.insync.replicas", "max.message.bytes", "flush.ms", "delete.retention.ms", "index.interval.bytes"}
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.open(t).AlterTopicConfigs(ctx, "t", func(c map[string]string) error {
				c[name] = fmt.Sprint(1000 + i)
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	final, err := s.Topic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		if final.Configs[name] != fmt.Sprint(1000+i) {
			t.Errorf("config %s = %q, want %d (lost update)", name, final.Configs[name], 1000+i)
		}
	}
	_, err = s.AlterTopicConfigs(ctx, "t", func(c map[string]string) error { c["segment.bytes"] = "10"; return nil })
	if !errors.Is(err, metadata.ErrInvalidConfig) {
		t.Fatalf("invalid alter: %v, want ErrInvalidConfig", err)
	}
	if after, _ := s.Topic(ctx, "t"); after.Revision != final.Revision {
		t.Fatalf("invalid alter changed the topic")
	}
	if _, err := s.AlterTopicConfigs(ctx, "nope", func(map[string]string) error { return nil }); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("alter missing topic: %v", err)
	}
}

func testAddPartitions(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	created, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}, {1}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AddPartitions(ctx, "t", [][]int32{{2}, {3}})
	if err != nil || len(got.Replicas) != 4 || got.ID != created.ID {
		t.Fatalf("add: %+v, %v", got, err)
	}
	states, err := s.PartitionStates(ctx, created.ID)
	if err != nil || len(states) != 4 || states[3].Leader != 3 {
		t.Fatalf("states %+v, %v", states, err)
	}
	if _, err := s.AddPartitions(ctx, "t", nil); !errors.Is(err, metadata.ErrInvalidPartitions) {
		t.Fatalf("add none: %v", err)
	}
	if _, err := s.AddPartitions(ctx, "t", [][]int32{{-1}}); !errors.Is(err, metadata.ErrInvalidReplicas) {
		t.Fatalf("add bad replicas: %v", err)
	}
	if _, err := s.AddPartitions(ctx, "nope", [][]int32{{1}}); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("add to missing topic: %v", err)
	}
}

func testPartitionCAS(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	created, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	st := metadata.PartitionState{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}}
	v1, err := s.CASPartitionState(ctx, id, 0, st)
	if err != nil || v1 <= 0 {
		t.Fatalf("first CAS: %d, %v", v1, err)
	}
	if _, err := s.CASPartitionState(ctx, id, 0, st); !errors.Is(err, metadata.ErrCASFailed) {
		t.Fatalf("CAS with version 0 after a write: %v, want ErrCASFailed", err)
	}
	st.Version, st.ISR = v1, []int32{2}
	v2, err := s.CASPartitionState(ctx, id, 0, st)
	if err != nil || v2 <= v1 {
		t.Fatalf("second CAS: %d, %v", v2, err)
	}
	if _, err := s.CASPartitionState(ctx, id, 0, st); !errors.Is(err, metadata.ErrCASFailed) {
		t.Fatalf("stale CAS: %v, want ErrCASFailed", err)
	}
	states, err := s.PartitionStates(ctx, id)
	if err != nil || states[0].Version != v2 || !slices.Equal(states[0].ISR, []int32{2}) || states[0].LeaderEpoch != 1 {
		t.Fatalf("states %+v, %v", states, err)
	}
	if _, err := s.CASPartitionState(ctx, id, 1, metadata.PartitionState{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}); !errors.Is(err, metadata.ErrInvalidPartitions) {
		t.Fatalf("CAS beyond the partition count: %v", err)
	}
	bad := metadata.PartitionState{Leader: 9, Replicas: []int32{1}, ISR: []int32{1}, Version: v2}
	if _, err := s.CASPartitionState(ctx, id, 0, bad); !errors.Is(err, metadata.ErrInvalidReplicas) {
		t.Fatalf("CAS of an inconsistent state: %v", err)
	}
	if err := s.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	st.Version = v2
	if _, err := s.CASPartitionState(ctx, id, 0, st); !errors.Is(err, metadata.ErrCASFailed) {
		t.Fatalf("CAS on a deleted topic: %v, want ErrCASFailed", err)
	}
	st.Version = 0
	if _, err := s.CASPartitionState(ctx, id, 0, st); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("initial CAS on a deleted topic: %v, want ErrTopicNotFound", err)
	}
}

func brokerIDs(t *testing.T, s *metadata.Store) []int32 {
	t.Helper()
	brokers, err := s.Brokers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, b := range brokers {
		ids = append(ids, b.NodeID)
	}
	return ids
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func testBrokerLease(t *testing.T, e *env) {
	ctx, observer := testCtx(t), e.store
	// Clean stop: cancelling the registration revokes the lease at once.
	regCtx, cancelReg := context.WithCancel(ctx)
	reg1, err := observer.RegisterBroker(regCtx, metadata.BrokerInfo{NodeID: 1, Host: "127.0.0.1", Port: 9092}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Crash: a store whose client dies cannot renew or revoke its lease.
	crashing := e.open(t)
	reg2, err := crashing.RegisterBroker(ctx, metadata.BrokerInfo{NodeID: 2, Host: "127.0.0.1", Port: 9093, Rack: "r1"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := brokerIDs(t, observer); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("brokers %v, want [1 2]", got)
	}
	time.Sleep(3 * time.Second) // longer than the TTL: keepalive must hold both
	if got := brokerIDs(t, observer); !slices.Equal(got, []int32{1, 2}) || isClosed(reg1.Lost) || isClosed(reg2.Lost) {
		t.Fatalf("after one TTL with keepalive: brokers %v, lost %v %v", got, isClosed(reg1.Lost), isClosed(reg2.Lost))
	}
	cancelReg()
	testkit.WaitFor(t, 5*time.Second, "lost closed after cancel", func() bool { return isClosed(reg1.Lost) })
	testkit.WaitFor(t, 5*time.Second, "broker 1 gone after cancel", func() bool { return slices.Equal(brokerIDs(t, observer), []int32{2}) })
	crashing.Client().Close()
	testkit.WaitFor(t, 10*time.Second, "lost closed after the client died", func() bool { return isClosed(reg2.Lost) })
	testkit.WaitFor(t, 15*time.Second, "broker 2 gone after its lease expired", func() bool { return len(brokerIDs(t, observer)) == 0 })
	// Re-registering an id replaces the old registration.
	if _, err := observer.RegisterBroker(ctx, metadata.BrokerInfo{NodeID: 3, Host: "a", Port: 1}, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := observer.RegisterBroker(ctx, metadata.BrokerInfo{NodeID: 3, Host: "b", Port: 2}, 5); err != nil {
		t.Fatal(err)
	}
	brokers, err := observer.Brokers(ctx)
	if err != nil || len(brokers) != 1 || brokers[0].Host != "b" {
		t.Fatalf("brokers after re-register: %+v, %v", brokers, err)
	}
}

// testRegistrar: a Registrar leads the states of its live registration
// only, stops at once when the lease is lost, and a re-registration (a new
// epoch) leads only states written for it.
func testRegistrar(t *testing.T, e *env) {
	ctx := testCtx(t)
	r := metadata.NewRegistrar(e.open(t), 8, 5)
	regCtx, cancelReg := context.WithCancel(ctx)
	reg, err := r.Register(regCtx, metadata.BrokerInfo{NodeID: 8, Host: "h", Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := metadata.PartitionState{Leader: 8, LeaderBrokerEpoch: reg.Epoch}
	if r.Current().Epoch != reg.Epoch || reg.Epoch == 0 || !r.Leads(first) {
		t.Fatalf("registered epoch %d, current %+v: must lead %+v", reg.Epoch, r.Current(), first)
	}
	cancelReg()
	testkit.WaitFor(t, 5*time.Second, "lost closed after cancel", func() bool { return isClosed(reg.Lost) })
	if r.Leads(first) {
		t.Fatal("leads after its registration was lost")
	}
	again, ok := r.Reregister(ctx, metadata.BrokerInfo{NodeID: 8, Host: "h", Port: 1}, slog.New(slog.DiscardHandler))
	if !ok || again.Epoch == reg.Epoch || r.Leads(first) || !r.Leads(metadata.PartitionState{Leader: 8, LeaderBrokerEpoch: again.Epoch}) {
		t.Fatalf("re-registered (%v) epoch %d after %d: leads the old state %v", ok, again.Epoch, reg.Epoch, r.Leads(first))
	}
}

// nextEvent waits for an event matching want, skipping others.
func nextEvent(t *testing.T, ch <-chan metadata.Event, what string, want func(metadata.Event) bool) metadata.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: watch closed", what)
			}
			if want(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("%s: no event", what)
		}
	}
}

func testWatch(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Topics) != 0 {
		t.Fatalf("snapshot %+v, %v", snap, err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	events := s.Watch(watchCtx, snap.Revision+1)
	created, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "w", Replicas: [][]int32{{1}, {1}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, events, "TopicPut", func(ev metadata.Event) bool { return ev.Kind == metadata.TopicPut })
	if ev.TopicName != "w" || ev.TopicID != created.ID || ev.Topic == nil || len(ev.Topic.Replicas) != 2 || ev.Revision != created.Revision {
		t.Fatalf("TopicPut %+v", ev)
	}
	version, err := s.CASPartitionState(ctx, created.ID, 1, metadata.PartitionState{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1}, ISR: []int32{1}})
	if err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, "PartitionPut", func(ev metadata.Event) bool { return ev.Kind == metadata.PartitionPut })
	if ev.TopicName != "w" || ev.TopicID != created.ID || ev.Partition != 1 || ev.State.LeaderEpoch != 4 || ev.State.Version != version {
		t.Fatalf("PartitionPut %+v state %+v", ev, ev.State)
	}
	if _, err := s.RegisterBroker(ctx, metadata.BrokerInfo{NodeID: 7, Host: "h", Port: 1}, 5); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, events, "BrokersChanged", func(ev metadata.Event) bool { return ev.Kind == metadata.BrokersChanged })
	if err := s.DeleteTopic(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, "TopicDeleted", func(ev metadata.Event) bool { return ev.Kind == metadata.TopicDeleted })
	if ev.TopicName != "w" || ev.TopicID != created.ID {
		t.Fatalf("TopicDeleted %+v", ev)
	}
	stop()
	for range events { // the channel must close once ctx ends
	}
	// The snapshot sees what the events described.
	snap, err = s.Snapshot(ctx)
	if err != nil || len(snap.Topics) != 0 || len(snap.Brokers) != 1 || snap.Brokers[0].NodeID != 7 {
		t.Fatalf("final snapshot %+v, %v", snap, err)
	}
}

func testWatchCompacted(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	first, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "a", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "b", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Compact(ctx, second.Revision); err != nil {
		t.Fatal(err)
	}
	events := s.Watch(ctx, first.Revision) // history before second.Revision is gone
	ev := nextEvent(t, events, "Resync", func(metadata.Event) bool { return true })
	if ev.Kind != metadata.Resync || ev.Revision < second.Revision {
		t.Fatalf("first event %+v, want Resync at >= %d", ev, second.Revision)
	}
	// The stream continues after the resync.
	if _, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "c", Replicas: [][]int32{{1}}}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, "TopicPut after resync", func(ev metadata.Event) bool { return ev.Kind == metadata.TopicPut })
	if ev.TopicName != "c" {
		t.Fatalf("event after resync %+v, want topic c", ev)
	}
}

func testProducerIDs(t *testing.T, e *env) {
	ctx := testCtx(t)
	const workers, perWorker, block = 6, 15, 10
	starts := make(chan int64, workers*perWorker)
	var wg sync.WaitGroup
	for range workers {
		s := e.open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				first, err := s.AllocateProducerIDs(ctx, block)
				if err != nil {
					t.Error(err)
					return
				}
				starts <- first
			}
		}()
	}
	wg.Wait()
	close(starts)
	var got []int64
	for first := range starts {
		got = append(got, first)
	}
	slices.Sort(got)
	if len(got) != workers*perWorker {
		t.Fatalf("%d blocks, want %d", len(got), workers*perWorker)
	}
	for i, first := range got { // disjoint and gapless: block i starts at i*block
		if first != int64(i*block) {
			t.Fatalf("block %d starts at %d, want %d (blocks %v)", i, first, i*block, got)
		}
	}
	if _, err := e.store.AllocateProducerIDs(ctx, 0); err == nil {
		t.Fatal("block of 0 ids accepted")
	}
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	start := func() *metadata.Embedded {
		e, err := metadata.StartEmbedded(metadata.EmbeddedConfig{Dir: dir, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := start()
	s := openStore(t, e.Endpoints(), "strata")
	ctx := testCtx(t)
	id, err := s.ClusterID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	created, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "kept", Replicas: [][]int32{{1}}, Configs: map[string]string{"cleanup.policy": "compact"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = start() // new ports, same data
	defer e.Close()
	s = openStore(t, e.Endpoints(), "strata")
	id2, err := s.ClusterID(ctx)
	if err != nil || id2 != id {
		t.Fatalf("cluster id after restart %q, %v; want %q", id2, err, id)
	}
	got, err := s.Topic(ctx, "kept")
	if err != nil || got.ID != created.ID || got.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("topic after restart %+v, %v", got, err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := metadata.Open(ctx, metadata.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: time.Second, Logger: quietLogger()})
	if err == nil {
		t.Fatal("Open succeeded against a closed port")
	}
	if err := (metadata.Config{}).Validate(); err == nil {
		t.Fatal("config without endpoints validated")
	}
	if err := (metadata.Config{Endpoints: []string{"x"}, Cluster: "a/b"}).Validate(); err == nil {
		t.Fatal("cluster name with a slash validated")
	}
}

// TestBrokerFencesBeforeLeaseExpiry: when etcd stops answering, lost must
// close before the lease could expire on the server (DESIGN.md §4: a leader
// that cannot renew stops leading first).
func TestBrokerFencesBeforeLeaseExpiry(t *testing.T) {
	etcd := metadatatest.StartExternalProcess(t)
	s := openStore(t, etcd.Endpoints, "fence")
	const ttl = 6
	reg, err := s.RegisterBroker(testCtx(t), metadata.BrokerInfo{NodeID: 1, Host: "h", Port: 1}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let a renewal or two happen
	if err := etcd.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	t.Logf("paused at %v", paused)
	t.Cleanup(func() { etcd.Resume() })
	select {
	case <-reg.Lost:
		// The last renewal was answered at or before the pause, so the
		// server's lease lives at least until paused + ~ttl.
		if elapsed := time.Since(paused); elapsed >= ttl*time.Second {
			t.Fatalf("lost closed %v after etcd stopped answering: not before the %ds lease could expire", elapsed, ttl)
		}
	case <-time.After(2 * ttl * time.Second):
		t.Fatal("lost not closed while etcd was unreachable")
	}
}

// TestReconnectBackoffStaysShort: while etcd is unreachable the client
// retries its connection every second or so however long the outage lasts,
// so a broker is back within moments of etcd (gRPC's default backoff grows
// to two minutes; a broker once stayed cut off ~30 s after an outage). The
// dead etcd's port is taken by a listener that records each attempt and
// closes it.
func TestReconnectBackoffStaysShort(t *testing.T) {
	e := metadatatest.StartExternalProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := metadata.Open(ctx, metadata.Config{Endpoints: e.Endpoints, Cluster: "backoff"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := strings.TrimPrefix(e.Endpoints[0], "http://")
	e.Kill()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("take the dead etcd's port: %v", err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var attempts []time.Time
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
			mu.Lock()
			attempts = append(attempts, time.Now())
			mu.Unlock()
		}
	}()
	const watch = 14 * time.Second // default backoff: attempts ~1, 2.6, 5.2, 9.3 s in
	for deadline := time.Now().Add(watch); time.Now().Before(deadline); {
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, _ = s.Brokers(rctx) // fails; keeps the client asking for a connection
		rcancel()
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(attempts); i++ {
		gaps = append(gaps, attempts[i].Sub(attempts[i-1]).Round(10*time.Millisecond))
	}
	if len(attempts) < 6 || slices.Max(gaps) > 2500*time.Millisecond {
		t.Fatalf("%d connection attempts in %v, gaps %v; want one at least every 2.5 s", len(attempts), watch, gaps)
	}
}
