package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

var disklessConfigs = map[string]string{"diskless.enable": "true"}

// TestPlanSkipsDiskless: whatever states a diskless topic's view holds
// (even ones that would need an election or a rebalance on a classic
// topic), Plan and Rebalance leave it alone and still plan the others.
func TestPlanSkipsDiskless(t *testing.T) {
	brokers := []metadata.BrokerInfo{broker(1, 100), broker(2, 200)}
	dl := TopicView{
		Topic: metadata.Topic{Name: "a-diskless", ID: metadata.TopicID{2}, Configs: disklessConfigs,
			Replicas: metadata.DisklessAssignment(3)},
		States: []metadata.PartitionState{
			metadata.InitialPartitionState(nil),
			metadata.InitialPartitionState(ids(1, 2)), // never elected
			state(2, 3, 200, ids(1, 2), ids(1, 2)),    // preferred replica not leading
		},
	}
	classic := oneTopic(nil, metadata.InitialPartitionState(ids(1, 2)))[0]
	changes := Plan(View{Brokers: brokers, Topics: []TopicView{dl, classic}})
	if len(changes) != 1 || changes[0].Topic != "t" {
		t.Fatalf("plan %v: want only the classic topic's election", changes)
	}
	if got := Rebalance(View{Brokers: brokers, Topics: []TopicView{dl}}, 0); len(got) != 0 {
		t.Fatalf("rebalance of a diskless topic: %v", got)
	}
}

// TestLeaderViewKeepsNoDisklessStates: the active controller's view holds
// a diskless topic's record but no partition states for it, from a
// snapshot or from the watch.
func TestLeaderViewKeepsNoDisklessStates(t *testing.T) {
	dl := metadata.Topic{Name: "d", ID: metadata.TopicID{2}, Configs: disklessConfigs,
		Replicas: metadata.DisklessAssignment(2), Revision: 5}
	classic := metadata.Topic{Name: "c", ID: metadata.TopicID{3}, Replicas: [][]int32{{1}}, Revision: 6}
	l := &leader{}
	l.load(metadata.Snapshot{Topics: []metadata.Topic{dl, classic}, Partitions: map[metadata.TopicID][]metadata.PartitionState{
		dl.ID:      {metadata.InitialPartitionState(nil), metadata.InitialPartitionState(nil)},
		classic.ID: {metadata.InitialPartitionState(ids(1))},
	}})
	if tv := l.topics[dl.ID]; tv == nil || tv.States != nil {
		t.Fatalf("diskless topic after load: %+v", tv)
	}
	grown := dl
	grown.Replicas, grown.Revision = metadata.DisklessAssignment(4), 7
	l.putTopic(grown)
	if tv := l.topics[dl.ID]; len(tv.Topic.Replicas) != 4 || tv.States != nil {
		t.Fatalf("diskless topic after adding partitions: %+v", tv)
	}
	fresh := metadata.Topic{Name: "e", ID: metadata.TopicID{4}, Configs: disklessConfigs,
		Replicas: metadata.DisklessAssignment(1), Revision: 8}
	l.putTopic(fresh)
	if tv := l.topics[fresh.ID]; tv == nil || tv.States != nil {
		t.Fatalf("new diskless topic: %+v", tv)
	}
	if tv := l.topics[classic.ID]; len(tv.States) != 1 {
		t.Fatalf("classic topic: %+v", tv)
	}
}

// TestControllerWritesNoDisklessStates: against etcd, the active
// controller elects the classic topic's leader and never writes a state
// for the diskless topic's partitions.
func TestControllerWritesNoDisklessStates(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	admin := openStore(t, endpoints, fmt.Sprintf("ctrl-dl-%d", time.Now().UnixNano()))
	ctx := context.Background()
	dl, err := admin.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "dl", Replicas: metadata.DisklessAssignment(3),
		Configs: disklessConfigs})
	if err != nil {
		t.Fatal(err)
	}
	c := startCandidate(t, admin, 1)
	if !c.WaitKnown(ctx) {
		t.Fatal("no controller known")
	}
	register(t, admin, 1)
	classic, err := admin.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "classic", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, classic.ID, "the classic topic's leader elected", func(st metadata.PartitionState) bool {
		return st.Leader == 1 && st.Version > 0
	})
	// Plans run after every change and every ReplanInterval; give one
	// more round the chance to (wrongly) write.
	time.Sleep(300 * time.Millisecond)
	states, err := admin.PartitionStates(ctx, dl.ID)
	if err != nil || len(states) != 3 {
		t.Fatalf("states %+v, %v", states, err)
	}
	for p, st := range states {
		if st.Version != 0 || st.Leader != -1 {
			t.Fatalf("diskless partition %d has a written state %+v", p, st)
		}
	}
}
