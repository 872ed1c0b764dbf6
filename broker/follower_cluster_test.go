package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// Two real brokers over one embedded etcd: the follower replicates the
// leader's partition through its followers, then the roles swap (states
// written straight into etcd, as the controller would).

// startReplicaBroker is startTestBroker with the followers wired (if New
// does not wire them yet) and closed before the logs close.
func startReplicaBroker(t *testing.T, endpoints []string, node int32, durability hotlog.Durability, peers map[int32]string) *testBroker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "test", Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: node, Listen: "127.0.0.1:0", DataDir: t.TempDir(), Durability: durability,
		ReplicaFetchMaxWait: 100 * time.Millisecond, ReplicaLagTimeMax: 10 * time.Second, PeerAddresses: peers,
		Logger: discardLogger}
	b, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if b.followers == nil {
		b.followers = newFollowers(b)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tb := &testBroker{b: b, store: store}
	t.Cleanup(func() {
		if tb.b != nil {
			tb.b.followers.Close()
		}
		tb.stop(t)
	})
	return tb
}

// hostedPartition is b's open replica of topic/index (nil if none yet).
func hostedPartition(b *Broker, topic string, index int) *partition {
	b.parts.mu.RLock()
	defer b.parts.mu.RUnlock()
	e := b.parts.byName[topic]
	if e == nil || index >= len(e.parts) {
		return nil
	}
	return e.parts[index]
}

// electLeader writes the partition state naming leader (at its current
// registration) with epoch, as the controller would.
func electLeader(t *testing.T, store *metadata.Store, id metadata.TopicID, leader *Broker, epoch int32, replicas []int32) {
	t.Helper()
	ctx := testCtx(t)
	for {
		states, err := store.PartitionStates(ctx, id)
		if err != nil || len(states) == 0 {
			t.Fatalf("partition states: %v", err)
		}
		st := metadata.PartitionState{Leader: leader.cfg.NodeID, LeaderEpoch: epoch, Replicas: replicas, ISR: replicas,
			LeaderBrokerEpoch: leader.registration().Epoch, Version: states[0].Version}
		_, err = store.CASPartitionState(ctx, id, 0, st)
		if err == nil {
			return
		}
		if !errors.Is(err, metadata.ErrCASFailed) {
			t.Fatal(err)
		}
	}
}

func produceTo(t *testing.T, b *Broker, topic string, from, n int, acks kgo.Acks) {
	t.Helper()
	opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.DefaultProduceTopic(topic)}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := newDataClient(t, b, opts...)
	var records []*kgo.Record
	for i := from; i < from+n; i++ {
		records = append(records, &kgo.Record{Value: []byte(fmt.Sprintf("value-%d", i))})
	}
	produceSyncAll(t, cl, records)
	cl.Close()
}

// caughtUp waits until follower holds exactly the leader's log with the
// leader's HW.
func caughtUp(t *testing.T, leader, follower *partition) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, "the follower to catch up", func() bool {
		hw := leader.highWatermark()
		return hw > 0 && hw == leader.log.LogEndOffset() && follower.log.LogEndOffset() == hw &&
			follower.replicationStatus().HighWatermark == hw
	})
	sameLog(t, leader.log, follower.log, 0)
}

func TestFollowerTwoBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and two brokers")
	}
	endpoints := metadatatest.StartEmbedded(t)
	b1 := startReplicaBroker(t, endpoints, 1, hotlog.DurabilityFsync, nil)
	b2 := startReplicaBroker(t, endpoints, 2, hotlog.DurabilityReplication, nil)
	topic, p1, p2 := createReplicatedTopic(t, b1, b2)

	// Broker 1 leads epoch 1: acks=all completes only once 2 fetched.
	electLeader(t, b1.store, topic.ID, b1.b, 1, []int32{1, 2})
	testkit.WaitFor(t, 20*time.Second, "broker 1 to lead", func() bool { return p1.isLeader() })
	produceTo(t, b1.b, "rep", 0, 200, kgo.AllISRAcks())
	caughtUp(t, p1, p2)

	// Broker 2 leads epoch 2; broker 1 truncates (nothing divergent here)
	// and follows it.
	electLeader(t, b1.store, topic.ID, b2.b, 2, []int32{1, 2})
	testkit.WaitFor(t, 20*time.Second, "broker 2 to lead", func() bool { return p2.isLeader() })
	produceTo(t, b2.b, "rep", 200, 100, kgo.AllISRAcks())
	caughtUp(t, p2, p1)
	if e, end := p1.log.EndOffsetForEpoch(1); e != 1 || end != 200 {
		t.Fatalf("broker 1's epoch 1 ends at (%d, %d), want (1, 200)", e, end)
	}
}

// createReplicatedTopic creates "rep" with one partition on brokers 1 and
// 2 and waits for both replicas to open.
func createReplicatedTopic(t *testing.T, b1, b2 *testBroker) (metadata.Topic, *partition, *partition) {
	t.Helper()
	topic, err := b1.store.CreateTopic(testCtx(t), metadata.CreateTopicRequest{Name: "rep", Replicas: [][]int32{{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "both replicas open", func() bool {
		return hostedPartition(b1.b, "rep", 0) != nil && hostedPartition(b2.b, "rep", 0) != nil
	})
	return topic, hostedPartition(b1.b, "rep", 0), hostedPartition(b2.b, "rep", 0)
}

// TestFollowerTwoBrokersTruncatesDivergentLeader: broker 2 cannot reach
// broker 1 (its peer address refuses connections), so broker 1's epoch-1
// writes (acks=1) never reach it. Once broker 2 leads epoch 2, broker 1
// must drop them (KIP-101 through the real OffsetForLeaderEpoch) and
// replicate broker 2's log exactly.
func TestFollowerTwoBrokersTruncatesDivergentLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and two brokers")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // connections to it are refused
	endpoints := metadatatest.StartEmbedded(t)
	b1 := startReplicaBroker(t, endpoints, 1, hotlog.DurabilityReplication, nil)
	b2 := startReplicaBroker(t, endpoints, 2, hotlog.DurabilityFsync, map[int32]string{1: dead})
	topic, p1, p2 := createReplicatedTopic(t, b1, b2)

	electLeader(t, b1.store, topic.ID, b1.b, 1, []int32{1, 2})
	testkit.WaitFor(t, 20*time.Second, "broker 1 to lead", func() bool { return p1.isLeader() })
	produceTo(t, b1.b, "rep", 0, 50, kgo.LeaderAck())
	if p1.log.LogEndOffset() != 50 || p2.log.LogEndOffset() != 0 {
		t.Fatalf("LEOs %d and %d: broker 2 was to miss every write", p1.log.LogEndOffset(), p2.log.LogEndOffset())
	}

	electLeader(t, b1.store, topic.ID, b2.b, 2, []int32{1, 2})
	testkit.WaitFor(t, 20*time.Second, "broker 2 to lead", func() bool { return p2.isLeader() })
	produceTo(t, b2.b, "rep", 1000, 30, kgo.AllISRAcks())
	caughtUp(t, p2, p1)
	if e := p1.log.LatestEpoch(); e != 2 || p1.log.LogEndOffset() != 30 {
		t.Fatalf("broker 1: latest epoch %d, LEO %d; want its epoch-1 suffix replaced by epoch 2 (LEO 30)", e, p1.log.LogEndOffset())
	}
	if _, end := p1.log.EndOffsetForEpoch(1); end != 0 {
		t.Fatalf("broker 1's epoch 1 ends at %d; want 0 (none of it kept)", end)
	}
}
