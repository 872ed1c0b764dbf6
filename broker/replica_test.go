package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/replica"
	"github.com/strata-log/strata/tier/objstore"
)

// Leader-side replication tests: broker 1 runs in-process; broker 2 is a
// fake follower (a registration in etcd and Fetch requests sent with
// replica id 2).

const fakeFollower = int32(2)

type replicaRig struct {
	tb    *testBroker
	b     *Broker
	cl    *kgo.Client
	topic string
	id    metadata.TopicID
}

// newReplicaRig starts broker 1, registers the fake broker 2 and creates
// topic "r" with one partition on replicas, waiting until broker 1 has
// applied the state the elector wrote for it.
func newReplicaRig(t *testing.T, durability hotlog.Durability, replicas []int32, configs map[string]string) *replicaRig {
	t.Helper()
	return newReplicaRigWith(t, replicas, configs, func(c *Config) { c.Durability = durability })
}

func newReplicaRigWith(t *testing.T, replicas []int32, configs map[string]string, edit func(*Config)) *replicaRig {
	t.Helper()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		edit(c)
		c.ReplicaLagTimeMax = 600 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := tb.store.RegisterBroker(ctx, metadata.BrokerInfo{NodeID: fakeFollower, Host: "127.0.0.1", Port: 1}, 30); err != nil {
		t.Fatal(err)
	}
	topic, err := tb.store.CreateTopic(testCtx(t), metadata.CreateTopicRequest{Name: "r", Replicas: [][]int32{replicas}, Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	_, cl := adminClient(t, tb.b)
	rig := &replicaRig{tb: tb, b: tb.b, cl: cl, topic: "r", id: topic.ID}
	if replicas[0] == tb.b.cfg.NodeID {
		testkit.WaitFor(t, 20*time.Second, "condition", func() bool { _, code := tb.b.parts.lookup("r", 0); return code == 0 })
	}
	return rig
}

func (rig *replicaRig) partition(t *testing.T) *partition {
	t.Helper()
	rig.b.parts.mu.RLock()
	defer rig.b.parts.mu.RUnlock()
	e := rig.b.parts.byName[rig.topic]
	if e == nil || e.parts[0] == nil {
		t.Fatal("partition not open")
	}
	return e.parts[0]
}

// followerFetch sends a Fetch as replica id with CurrentLeaderEpoch epoch.
func (rig *replicaRig) followerFetch(t *testing.T, replica int32, offset int64, epoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := newFetchReq(rig.topic, rig.id, offset, 0, 0)
	req.ReplicaID, req.ReplicaState.ID = replica, replica
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
	return fetchOnePartition(t, rig.cl, req)
}

func (rig *replicaRig) epoch(t *testing.T) int32 { return rig.partition(t).replica.Epoch() }

func (rig *replicaRig) storedISR(t *testing.T) []int32 {
	t.Helper()
	states, err := rig.tb.store.PartitionStates(testCtx(t), rig.id)
	if err != nil {
		t.Fatal(err)
	}
	return states[0].ISR
}

// produceAsync sends one acks=-1 produce and returns a channel with its
// partition answer.
func (rig *replicaRig) produceAsync(t *testing.T, records int, timeoutMillis int32) <-chan kmsg.ProduceResponseTopicPartition {
	t.Helper()
	wc := dialWire(t, rig.b)
	wc.send(newProduceReq(rig.topic, -1, timeoutMillis, buildBatch(batchSpec{records: records, timestamp: 1})), 1)
	out := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() {
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.ErrorCode = -99 // transport failure
		if _, body, err := wc.recv(true); err == nil {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = 11
			if resp.ReadFrom(body) == nil {
				sp = resp.Topics[0].Partitions[0]
			}
		}
		out <- sp
	}()
	return out
}

func TestLeaderHighWatermarkFollowsFollowerFetches(t *testing.T) {
	for _, durability := range []hotlog.Durability{hotlog.DurabilityReplication, hotlog.DurabilityFsync} {
		t.Run(map[hotlog.Durability]string{hotlog.DurabilityReplication: "replication", hotlog.DurabilityFsync: "fsync"}[durability], func(t *testing.T) {
			rig := newReplicaRig(t, durability, []int32{1, fakeFollower}, nil)
			p, epoch := rig.partition(t), rig.epoch(t)
			if sp := produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 5, timestamp: 1})); sp.ErrorCode != 0 {
				t.Fatalf("produce: %d", sp.ErrorCode)
			}
			time.Sleep(200 * time.Millisecond) // flushed by now; the HW must still wait
			if hw := p.highWatermark(); hw != 0 {
				t.Fatalf("HW %d before the follower fetched, want 0", hw)
			}
			if sp := fetchOnePartition(t, rig.cl, newFetchReq(rig.topic, rig.id, 0, 0, 0)); sp.HighWatermark != 0 || len(sp.RecordBatches) != 0 {
				t.Fatalf("consumer saw past the HW: %+v", sp)
			}
			// The follower reads past the HW (up to the LEO); the HW moves
			// once it fetches again at the end.
			sp := rig.followerFetch(t, fakeFollower, 0, epoch)
			if sp.ErrorCode != 0 || countRecords(t, sp.RecordBatches) != 5 || sp.HighWatermark != 0 {
				t.Fatalf("follower fetch at 0: %+v", sp)
			}
			rig.followerFetch(t, fakeFollower, 5, epoch)
			testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.highWatermark() == 5 })
			if sp := rig.followerFetch(t, fakeFollower, 5, epoch); sp.ErrorCode != 0 || sp.HighWatermark != 5 {
				t.Fatalf("follower fetch at the LEO: %+v", sp)
			}
			if sp := fetchOnePartition(t, rig.cl, newFetchReq(rig.topic, rig.id, 0, 0, 0)); countRecords(t, sp.RecordBatches) != 5 {
				t.Fatalf("consumer after the HW moved: %+v", sp)
			}
		})
	}
}

func TestAcksAllWaitsForFollower(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityFsync, []int32{1, fakeFollower}, map[string]string{"min.insync.replicas": "2"})
	epoch := rig.epoch(t)
	done := rig.produceAsync(t, 3, 10_000)
	select {
	case sp := <-done:
		t.Fatalf("acks=all answered before the follower fetched: %+v", sp)
	case <-time.After(300 * time.Millisecond):
	}
	rig.followerFetch(t, fakeFollower, 0, epoch)
	rig.followerFetch(t, fakeFollower, 3, epoch)
	select {
	case sp := <-done:
		if sp.ErrorCode != 0 || sp.BaseOffset != 0 {
			t.Fatalf("acks=all: %+v", sp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acks=all not answered after the follower caught up")
	}
}

func TestISRShrinkAndMinInsyncReplicas(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityReplication, []int32{1, fakeFollower}, map[string]string{"min.insync.replicas": "2"})
	epoch := rig.epoch(t)
	rig.followerFetch(t, fakeFollower, 0, epoch)
	// The follower stops fetching: a waiting acks=all gets
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND once the ISR shrinks under it.
	done := rig.produceAsync(t, 2, 20_000)
	select {
	case sp := <-done:
		if sp.ErrorCode != kerr.NotEnoughReplicasAfterAppend.Code {
			t.Fatalf("acks=all during the shrink: %+v", sp)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("acks=all not answered after the lag time")
	}
	if isr := rig.storedISR(t); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR in etcd %v, want [1]", isr)
	}
	if sp := produceRaw(t, rig.b, rig.topic, -1, buildBatch(batchSpec{records: 1, timestamp: 1})); sp.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all below min.insync.replicas: %+v", sp)
	}
	if sp := produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 1, timestamp: 1})); sp.ErrorCode != 0 || sp.BaseOffset != 2 {
		t.Fatalf("acks=1 below min.insync.replicas: %+v", sp)
	}
	// Caught up again: the follower rejoins, and acks=all works.
	rig.followerFetch(t, fakeFollower, 3, epoch)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return slices.Equal(rig.storedISR(t), []int32{1, fakeFollower}) })
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return slices.Equal(rig.partition(t).replicationStatus().ISR, []int32{1, fakeFollower}) })
	// A follower that fetches at the LEO stays caught up (an idle one
	// would be out of sync as soon as the LEO moves past it).
	rig.followerFetch(t, fakeFollower, 3, epoch)
	done = rig.produceAsync(t, 1, 10_000)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return rig.partition(t).replicationStatus().PendingAcks == 1 })
	rig.followerFetch(t, fakeFollower, 4, epoch)
	if sp := <-done; sp.ErrorCode != 0 || sp.BaseOffset != 3 {
		t.Fatalf("acks=all after the ISR healed: %+v", sp)
	}
	// Both changes were counted as committed, whichever of the CAS answer
	// and the watch event came first.
	if s := rig.partition(t).replicationStatus(); s.Counters.ISRShrinks != 1 || s.Counters.ISRExpands != 1 {
		t.Fatalf("counters %+v", s.Counters)
	}
}

func TestFollowerFetchErrors(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityReplication, []int32{1, fakeFollower}, nil)
	epoch := raiseLeaderEpoch(t, rig.b, rig.topic, rig.id)
	produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 2, timestamp: 1}))
	tests := []struct {
		name    string
		replica int32
		offset  int64
		epoch   int32
		want    int16
	}{
		{"ok", fakeFollower, 0, epoch, 0},
		{"no epoch check", fakeFollower, 0, -1, 0},
		{"older epoch", fakeFollower, 0, epoch - 1, kerr.FencedLeaderEpoch.Code},
		{"newer epoch", fakeFollower, 0, epoch + 1, kerr.UnknownLeaderEpoch.Code},
		{"not a replica", 3, 0, epoch, kerr.NotLeaderForPartition.Code},
		{"past the LEO", fakeFollower, 3, epoch, kerr.OffsetOutOfRange.Code},
	}
	for _, tt := range tests {
		if sp := rig.followerFetch(t, tt.replica, tt.offset, tt.epoch); sp.ErrorCode != tt.want {
			t.Errorf("%s: error %d, want %d", tt.name, sp.ErrorCode, tt.want)
		}
	}
}

func TestOffsetForLeaderEpochFromFollower(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityReplication, []int32{1, fakeFollower}, nil)
	epoch := raiseLeaderEpoch(t, rig.b, rig.topic, rig.id)
	ask := func(requested int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = fakeFollower
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = rig.topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = requested, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return requestDirect(t, rig.cl, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	// An empty log: the leader's epoch starts at 0 even with no batch of
	// it, so a follower with an older epoch truncates to 0.
	if sp := ask(epoch - 1); sp.ErrorCode != 0 || sp.LeaderEpoch != epoch-1 || sp.EndOffset != 0 {
		t.Fatalf("older epoch on an empty leader: %+v", sp)
	}
	produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 4, timestamp: 1}))
	if sp := ask(epoch); sp.ErrorCode != 0 || sp.LeaderEpoch != epoch || sp.EndOffset != 4 {
		t.Fatalf("current epoch: %+v", sp)
	}
}

func TestNotLeaderAnswersNameTheLeader(t *testing.T) {
	// The fake broker 2 is elected: broker 1 is a follower (its follower
	// cannot reach 2, which does not matter here).
	rig := newReplicaRig(t, hotlog.DurabilityReplication, []int32{fakeFollower, 1}, nil)
	var st metadata.PartitionState
	testkit.WaitFor(t, 20*time.Second, "condition", func() bool {
		view, ok := rig.b.parts.topic(rig.topic)
		if !ok || len(view.states) == 0 {
			return false
		}
		st = view.states[0]
		return st.Leader == fakeFollower && st.LeaderBrokerEpoch != 0
	})
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return rig.partition(t).replicationStatus().Role == replication.RoleFollower })
	wc := dialWire(t, rig.b)
	wc.send(newProduceReq(rig.topic, 1, 1000, buildBatch(batchSpec{records: 1, timestamp: 1})), 1)
	_, body, err := wc.recv(true)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 11
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != fakeFollower ||
		sp.CurrentLeader.LeaderEpoch != st.LeaderEpoch {
		t.Fatalf("produce to a follower: %+v", sp)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != fakeFollower || resp.Brokers[0].Port != 1 {
		t.Fatalf("node endpoints %+v", resp.Brokers)
	}
	fsp := fetchOnePartition(t, rig.cl, newFetchReq(rig.topic, rig.id, 0, 0, 0))
	if fsp.ErrorCode != kerr.NotLeaderForPartition.Code || fsp.CurrentLeader.LeaderID != fakeFollower {
		t.Fatalf("fetch from a follower: %+v", fsp)
	}
}

func TestRegistrationLostStopsLeading(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityReplication, []int32{1, fakeFollower}, nil)
	waiting := rig.produceAsync(t, 1, 20_000)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return rig.partition(t).replicationStatus().PendingAcks == 1 })
	rig.b.registrationLost()
	if sp := <-waiting; sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("waiting acks=all after the registration was lost: %+v", sp)
	}
	if sp := produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 1, timestamp: 1})); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce after the registration was lost: %+v", sp)
	}
	// A new election (a higher epoch naming this registration) makes it
	// lead again, over the same log.
	bumpLeaderEpoch(t, rig.tb, rig.id, rig.partition(t))
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return rig.partition(t).isLeader() })
	if sp := produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 1, timestamp: 1})); sp.ErrorCode != 0 || sp.BaseOffset != 1 {
		t.Fatalf("produce after re-election: %+v", sp)
	}
}

// followAlong fetches as the fake follower from the LEO on, over and over,
// so the leader's HW keeps up with its LEO; it stops with the test.
func (rig *replicaRig) followAlong(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	epoch := rig.epoch(t)
	go func() {
		defer close(done)
		offset := int64(0)
		for ctx.Err() == nil {
			req := newFetchReq(rig.topic, rig.id, offset, 1, 100)
			req.ReplicaID, req.ReplicaState.ID = fakeFollower, fakeFollower
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
			resp, err := rig.cl.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				continue
			}
			sp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if sp.ErrorCode == kerr.OffsetMovedToTieredStorage.Code {
				offset = rig.partition(t).localLogStartOffset()
			}
			offset = nextFetchOffset(sp.RecordBatches, offset)
		}
	}()
}

// nextFetchOffset is the offset after the last whole batch in batches.
func nextFetchOffset(batches []byte, offset int64) int64 {
	for len(batches) > 0 {
		var rb kmsg.RecordBatch
		if rb.ReadFrom(batches) != nil {
			break
		}
		offset = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		batches = batches[12+int(rb.Length):]
	}
	return offset
}

func TestFollowerFetchBelowLocalStartIsTiered(t *testing.T) {
	mem := objstore.NewMemStore()
	rig := newReplicaRigWith(t, []int32{1, fakeFollower}, map[string]string{
		"internal.segment.bytes": "65536", "local.retention.bytes": "65536", "retention.ms": "-1",
	}, tierTestConfig(mem))
	rig.followAlong(t)
	producer := newDataClient(t, rig.b, kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	records := make([]*kgo.Record, 600)
	for i := range records {
		records[i] = &kgo.Record{Topic: rig.topic, Value: tierValue(0, int64(i))}
	}
	produceSyncAll(t, producer, records) // acks=all: the follower's fetches move the HW
	p := rig.partition(t)
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool { return p.localLogStartOffset() > 0 })
	epoch := rig.epoch(t)
	if sp := rig.followerFetch(t, fakeFollower, 0, epoch); sp.ErrorCode != kerr.OffsetMovedToTieredStorage.Code {
		t.Fatalf("follower fetch below the local log start: %+v", sp)
	}
	start := p.localLogStartOffset()
	if sp := rig.followerFetch(t, fakeFollower, start, epoch); sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 || sp.LogStartOffset != 0 {
		t.Fatalf("follower fetch at the local log start %d: %+v", start, sp)
	}
	// A consumer below the local start is served from the bucket.
	if sp := fetchOnePartition(t, rig.cl, newFetchReq(rig.topic, rig.id, 0, 1, 5000)); sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 {
		t.Fatalf("consumer fetch from the bucket: %+v", sp)
	}
}

// TestReappliedLeaderStateReportsProgress: applying the state a replica
// already leads (the same epoch and version, as after registering again)
// while the log is ahead of what the machine was told must still tell it:
// the HW reaches the flushed LEO. It once stored the log's positions as
// reported without reporting them, and the HW stayed behind for good.
func TestReappliedLeaderStateReportsProgress(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityFsync, []int32{1}, nil)
	p := rig.partition(t)
	var leo int64
	err := p.replica.WithReplica(func(r *replication.Replica) error {
		// Appended behind the machine's back: the watcher cannot report
		// it while we hold the replica lock.
		res, err := p.log.Append(buildBatch(batchSpec{records: 3, timestamp: 1}), r.LeaderEpoch())
		if err != nil {
			return err
		}
		leo = res.LastOffset + 1
		if err := p.log.WaitFlushed(testCtx(t), res.LastOffset); err != nil {
			return err
		}
		if err := p.replica.BecomeLeaderLocked(r, p.replica.AppliedLocked().Led, leadership{b: rig.b, p: p}); err != nil {
			return err
		}
		// What counts as reported is what the machine was told: otherwise
		// neither the watcher nor the tick reports the rest.
		reportedLEO, reportedFlushed := p.replica.Reported()
		if s := r.Status(); s.LEO != reportedLEO || s.DurableOffset != reportedFlushed {
			t.Errorf("machine LEO %d durable %d, recorded as reported %d and %d",
				s.LEO, s.DurableOffset, reportedLEO, reportedFlushed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.highWatermark() == leo })
}

// TestTickReportsOnlyProgressOwedForAWholeTick: the tick's safety net
// reports log progress only once it has been unreported for a whole tick
// interval of wall time. Two checks in quick succession (a tick loop held
// up by a slow partition, then the next tick at once) are no miss; a
// report owed for longer is made, and counted.
func TestTickReportsOnlyProgressOwedForAWholeTick(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityFsync, []int32{1}, nil)
	p := rig.partition(t)
	err := p.replica.WithReplica(func(r *replication.Replica) error {
		// Appended behind the machine's back: the watcher cannot report
		// it while we hold the replica lock.
		res, err := p.log.Append(buildBatch(batchSpec{records: 3, timestamp: 1}), r.LeaderEpoch())
		if err != nil {
			return err
		}
		if err := p.log.WaitFlushed(testCtx(t), res.LastOffset); err != nil {
			return err
		}
		for range 2 {
			if err := p.replica.ReportMissedProgressLocked(r); err != nil {
				return err
			}
		}
		if got := rig.b.ReplicaStats().MissedProgress; got != 0 {
			t.Errorf("two checks in quick succession counted %d misses, want 0", got)
		}
		time.Sleep(replica.TickInterval)
		if err := p.replica.ReportMissedProgressLocked(r); err != nil {
			return err
		}
		if got := rig.b.ReplicaStats().MissedProgress; got != 1 {
			t.Errorf("progress owed for a whole tick: %d misses counted, want 1", got)
		}
		if s := r.Status(); s.LEO != res.LastOffset+1 || s.DurableOffset != res.LastOffset+1 {
			t.Errorf("machine told LEO %d durable %d, want %d", s.LEO, s.DurableOffset, res.LastOffset+1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
