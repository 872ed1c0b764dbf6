package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/datadir"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/replica"
	"github.com/strata-log/strata/tier"
)

// The partition registry's sync, driven directly with in-memory twins for
// the replica shell and the coordinators: no broker and no etcd.

// memISRStore is an ISR store nobody writes to (no replica leads here).
type memISRStore struct{}

func (memISRStore) CASPartitionState(context.Context, metadata.TopicID, int32, metadata.PartitionState) (int64, error) {
	return 0, metadata.ErrCASFailed
}

func (memISRStore) PartitionStates(context.Context, metadata.TopicID) ([]metadata.PartitionState, error) {
	return nil, nil
}

// noOutputs drops a replica's outputs (it never follows anyone here).
type noOutputs struct{}

func (noOutputs) Follow(replication.FetchStart) {}
func (noOutputs) Query(replication.EpochQuery)  {}
func (noOutputs) StopFollowing()                {}
func (noOutputs) LeadershipChanged()            {}

// appliedState is one state the registry asked the replica twin to apply.
type appliedState struct {
	topic   string
	index   int32
	version int64
	leader  int32
}

// replicaTwin builds real replica cores over the opened logs and records
// the states the registry applies to them.
type replicaTwin struct {
	shell *replica.Shell
	mu    sync.Mutex
	calls []appliedState
}

func (r *replicaTwin) newReplicaCore(p *partition, cfg metadata.TopicConfig) (*replica.Core, error) {
	return r.shell.New(replica.Partition{Topic: p.topic, TopicID: p.topicID, Index: p.index}, p.log,
		replica.MinInsync(cfg), noOutputs{})
}

func (r *replicaTwin) applyReplicaState(p *partition, st metadata.PartitionState, _ metadata.TopicConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, appliedState{topic: p.topic, index: p.index, version: st.Version, leader: st.Leader})
}

func (r *replicaTwin) applied() []appliedState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// coordinatorTwin records which topics the coordinators heard about.
type coordinatorTwin struct {
	leadership []string
	removed    []string
}

func (c *coordinatorTwin) offsetsLeadershipLocked(e *topicEntry) {
	c.leadership = append(c.leadership, e.topic.Name)
}

func (c *coordinatorTwin) offsetsTopicRemovedLocked(e *topicEntry) {
	c.removed = append(c.removed, e.topic.Name)
}

type registryFixture struct {
	m        *partitionManager
	replicas *replicaTwin
	coords   *coordinatorTwin
	dir      string
}

// newTestRegistry is a registry of node 1 over a fresh data directory.
func newTestRegistry(t *testing.T) *registryFixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &registryFixture{m: &partitionManager{}, replicas: &replicaTwin{}, coords: &coordinatorTwin{}, dir: t.TempDir()}
	f.m.init()
	f.m.repl.Init(replica.ShellConfig{ReplicaID: 1, LagTimeMax: 10 * time.Second, Fsync: true, Store: memISRStore{},
		Lifetime: ctx, Logger: log})
	f.replicas.shell = &f.m.repl
	f.m.configure(registryDeps{node: 1, dataDir: f.dir, durability: hotlog.DurabilityFsync, manifest: tier.NewManifest(),
		tiered: func(string, metadata.TopicConfig) bool { return false }, replicas: f.replicas, coords: f.coords, log: log})
	t.Cleanup(func() {
		cancel()
		if err := f.m.closeAll(log); err != nil {
			t.Errorf("closing the registry: %v", err)
		}
	})
	return f
}

func testTopic(name string, id byte, revision int64, replicas ...[]int32) metadata.Topic {
	return metadata.Topic{Name: name, ID: metadata.TopicID{id}, Revision: revision, Replicas: replicas}
}

// hosted lists the indexes of name's open partitions.
func (f *registryFixture) hosted(name string) []int32 {
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	var out []int32
	if e := f.m.byName[name]; e != nil {
		for i, p := range e.parts {
			if p != nil {
				out = append(out, int32(i))
			}
		}
	}
	return out
}

func (f *registryFixture) dirExists(name string) bool {
	_, err := os.Stat(filepath.Join(f.dir, name))
	return err == nil
}

func TestRegistryOpensOnlyHostedPartitions(t *testing.T) {
	f := newTestRegistry(t)
	if err := f.m.applyTopic(testTopic("t", 1, 5, []int32{1, 2}, []int32{2, 3}, []int32{3, 1}), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.hosted("t"); !slices.Equal(got, []int32{0, 2}) {
		t.Fatalf("open partitions %v, want [0 2]", got)
	}
	if !f.dirExists("t-0") || f.dirExists("t-1") || !f.dirExists("t-2") {
		t.Fatal("partition directories do not match the hosted partitions")
	}
	got, err := os.ReadFile(filepath.Join(f.dir, "t-0", datadir.MetadataFile))
	if err != nil || string(got) != datadir.Metadata(metadata.TopicID{1}) {
		t.Fatalf("partition.metadata = %q, %v", got, err)
	}
	// Default states (the first replica leads) reach the open replicas only.
	want := []appliedState{{"t", 0, 0, 1}, {"t", 2, 0, 3}}
	if got := f.replicas.applied(); !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	if !slices.Equal(f.coords.leadership, []string{"t"}) {
		t.Fatalf("coordinators heard %v", f.coords.leadership)
	}
	// Nobody leads yet: lookups find the partition but not a leader.
	if _, code := f.m.lookup("t", 0); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("lookup t-0: code %d", code)
	}
	if _, code := f.m.lookup("t", 3); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("lookup t-3: code %d", code)
	}
	if _, code := f.m.lookupByID(metadata.TopicID{9}, 0); code != kerr.UnknownTopicID.Code {
		t.Fatalf("lookup by unknown id: code %d", code)
	}
	if name, ok := f.m.topicName(metadata.TopicID{1}); !ok || name != "t" {
		t.Fatalf("topicName = %q, %v", name, ok)
	}
}

func TestRegistryIgnoresStaleTopicAndKeepsNewerStates(t *testing.T) {
	f := newTestRegistry(t)
	if err := f.m.applyTopic(testTopic("t", 1, 5, []int32{1}), nil); err != nil {
		t.Fatal(err)
	}
	f.m.applyPartitionState(metadata.TopicID{1}, 0, metadata.PartitionState{Leader: 1, Replicas: []int32{1}, Version: 3})
	f.m.applyPartitionState(metadata.TopicID{1}, 0, metadata.PartitionState{Leader: 2, Replicas: []int32{1}, Version: 2})
	f.replicas.applied()

	// A stale revision changes nothing; a newer one with an older state
	// keeps the newer state it knows.
	stale := testTopic("t", 1, 4, []int32{1})
	stale.Configs = map[string]string{"retention.ms": "1"}
	if err := f.m.applyTopic(stale, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.m.topic("t"); v.topic.Revision != 5 || v.cfg.RetentionMs == 1 {
		t.Fatalf("stale topic applied: %+v", v.topic)
	}
	newer := testTopic("t", 1, 6, []int32{1}, []int32{1})
	newer.Configs = map[string]string{"retention.ms": "4242"}
	old := []metadata.PartitionState{{Leader: 2, Replicas: []int32{1}, Version: 1}}
	if err := f.m.applyTopic(newer, old); err != nil {
		t.Fatal(err)
	}
	v, _ := f.m.topic("t")
	if v.cfg.RetentionMs != 4242 || len(v.states) != 2 || v.states[0].Version != 3 || v.states[0].Leader != 1 {
		t.Fatalf("after the newer topic: cfg %d, states %+v", v.cfg.RetentionMs, v.states)
	}
	if got := f.hosted("t"); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("open partitions %v, want [0 1]", got)
	}
	f.m.mu.RLock()
	p := f.m.byName["t"].parts[0]
	f.m.mu.RUnlock()
	if p.config().RetentionMs != 4242 {
		t.Fatal("the open partition did not get the new config")
	}
}

func TestRegistryRemovalIsFinal(t *testing.T) {
	f := newTestRegistry(t)
	topic := testTopic("t", 1, 5, []int32{1})
	if err := f.m.applyTopic(topic, nil); err != nil {
		t.Fatal(err)
	}
	f.m.removeTopic("t", topic.ID)
	if _, ok := f.m.topic("t"); ok || f.dirExists("t-0") {
		t.Fatal("the topic or its directory survived its removal")
	}
	if !slices.Equal(f.coords.removed, []string{"t"}) {
		t.Fatalf("coordinators heard removals %v", f.coords.removed)
	}
	// A late watch event of the deleted id cannot revive it.
	if err := f.m.applyTopic(topic, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.m.topic("t"); ok || f.dirExists("t-0") {
		t.Fatal("a late event revived a deleted topic")
	}
}

func TestRegistryRecreatedTopicReplacesTheOld(t *testing.T) {
	f := newTestRegistry(t)
	if err := f.m.applyTopic(testTopic("t", 1, 5, []int32{1}), nil); err != nil {
		t.Fatal(err)
	}
	if err := f.m.applyTopic(testTopic("t", 2, 9, []int32{1}), nil); err != nil {
		t.Fatal(err)
	}
	if id, _ := f.m.topicID("t"); id != (metadata.TopicID{2}) {
		t.Fatalf("topic id %v, want the new one", id)
	}
	if _, ok := f.m.topicByID(metadata.TopicID{1}); ok {
		t.Fatal("the old id is still mirrored")
	}
	got, _ := os.ReadFile(filepath.Join(f.dir, "t-0", datadir.MetadataFile))
	if string(got) != datadir.Metadata(metadata.TopicID{2}) {
		t.Fatalf("the directory belongs to %q", got)
	}
	// The old topic's deletion, seen late by the watch, leaves the new one.
	f.m.removeTopicAt("t", metadata.TopicID{1}, 7)
	if _, ok := f.m.topic("t"); !ok {
		t.Fatal("the old topic's deletion removed the new one")
	}
}

func TestRegistryLoadAndResync(t *testing.T) {
	f := newTestRegistry(t)
	// A stray directory of a partition metadata does not give this node.
	stray := filepath.Join(f.dir, "old-0")
	if err := datadir.Claim(stray, metadata.TopicID{7}); err != nil {
		t.Fatal(err)
	}
	a, b := testTopic("a", 1, 5, []int32{1}), testTopic("b", 2, 6, []int32{1})
	if err := f.m.load(metadata.Snapshot{Revision: 6, Topics: []metadata.Topic{a, b}}); err != nil {
		t.Fatal(err)
	}
	if f.dirExists("old-0") || !f.dirExists("a-0") || !f.dirExists("b-0") {
		t.Fatal("load did not leave exactly the hosted directories")
	}
	// c is applied locally after the resync's snapshot was taken.
	if err := f.m.applyTopic(testTopic("c", 3, 20, []int32{1}), nil); err != nil {
		t.Fatal(err)
	}
	f.m.resync(metadata.Snapshot{Revision: 10, Topics: []metadata.Topic{a}})
	var names []string
	for _, v := range f.m.allTopics() {
		names = append(names, v.topic.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Fatalf("topics after resync %v, want [a c]", names)
	}
}

// memSource is a metadata source over a fixed snapshot; the test sends the
// events itself.
type memSource struct{ snap metadata.Snapshot }

func (s *memSource) Snapshot(context.Context) (metadata.Snapshot, error) { return s.snap, nil }
func (s *memSource) Brokers(context.Context) ([]metadata.BrokerInfo, error) {
	return s.snap.Brokers, nil
}
func (s *memSource) Watch(context.Context, int64) <-chan metadata.Event {
	panic("the test feeds events to run directly")
}

// brokerListTwin records what the watch did to the broker list.
type brokerListTwin struct {
	list      []metadata.BrokerInfo
	refreshes int
}

func (l *brokerListTwin) set(list []metadata.BrokerInfo)                      { l.list = list }
func (l *brokerListTwin) refresh(context.Context, brokerLister, *slog.Logger) { l.refreshes++ }

func TestMetadataWatchFeedsTheMirrors(t *testing.T) {
	f := newTestRegistry(t)
	a := testTopic("a", 1, 5, []int32{1})
	src := &memSource{snap: metadata.Snapshot{Revision: 5, Topics: []metadata.Topic{a},
		Brokers: []metadata.BrokerInfo{{NodeID: 1}}}}
	brokers := &brokerListTwin{}
	w := &metadataWatch{source: src, manifest: f.m.deps.manifest, parts: f.m, brokers: brokers, log: f.m.deps.log}
	rev, err := w.load(context.Background())
	if err != nil || rev != 5 || len(brokers.list) != 1 || !slices.Equal(f.hosted("a"), []int32{0}) {
		t.Fatalf("load: rev %d, err %v, brokers %v, a %v", rev, err, brokers.list, f.hosted("a"))
	}
	f.replicas.applied()

	b := testTopic("b", 2, 6, []int32{1})
	events := make(chan metadata.Event, 8)
	events <- metadata.Event{Kind: metadata.TopicPut, TopicName: "b", Topic: &b, Revision: 6}
	events <- metadata.Event{Kind: metadata.PartitionPut, TopicID: b.ID, Partition: 0, Revision: 7,
		State: &metadata.PartitionState{Leader: 1, Replicas: []int32{1}, Version: 1}}
	events <- metadata.Event{Kind: metadata.BrokersChanged, Revision: 8}
	events <- metadata.Event{Kind: metadata.TopicDeleted, TopicName: "a", TopicID: a.ID, Revision: 9}
	close(events)
	w.run(context.Background(), events)
	if _, ok := f.m.topic("a"); ok || !slices.Equal(f.hosted("b"), []int32{0}) {
		t.Fatal("the events did not reach the registry")
	}
	if got := f.replicas.applied(); len(got) != 2 || got[1] != (appliedState{"b", 0, 1, 1}) {
		t.Fatalf("applied %v", got)
	}
	if brokers.refreshes != 1 {
		t.Fatalf("broker list refreshed %d times", brokers.refreshes)
	}

	// After lost events a snapshot without b drops it.
	src.snap = metadata.Snapshot{Revision: 10}
	resync := make(chan metadata.Event, 1)
	resync <- metadata.Event{Kind: metadata.Resync}
	close(resync)
	w.run(context.Background(), resync)
	if _, ok := f.m.topic("b"); ok {
		t.Fatal("resync kept a topic missing from the snapshot")
	}
}
