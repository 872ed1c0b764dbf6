package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/metadata/metadatatest"
)

// txnProduce sends one transactional batch for topic/partition with the
// transactional id and returns the partition's code.
func txnProduce(t *testing.T, cl kmsg.Requestor, txnID, topic string, partition int32, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = kmsg.StringPtr(txnID), -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	if m := kresp.Topics[0].Partitions[0].ErrorMessage; m != nil {
		t.Logf("produce %s-%d: %s", topic, partition, *m)
	}
	return kresp.Topics[0].Partitions[0].ErrorCode
}

// initTxnProducer gets a producer id and epoch for txnID; never id 0,
// which the test batch builder treats as "no producer id" (another
// transactional id takes it).
func initTxnProducer(t *testing.T, cl *kgo.Client, txnID string) (int64, int16) {
	t.Helper()
	pid, epoch := initTxnProducerOnce(t, cl, txnID)
	if pid == 0 {
		t.Fatal("got producer id 0; init a throwaway transactional id first")
	}
	return pid, epoch
}

func initTxnProducerOnce(t *testing.T, cl *kgo.Client, txnID string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// addTxnPartition adds topic/partition to txnID's transaction (client form).
func addTxnPartition(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16, topic string, partition int32) {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partition: %v %+v", err, resp)
	}
}

// preTV2Client is a client limited to Kafka 3.5's versions (Produce v9,
// EndTxn v3): its transactional batches are verified, not implicitly added
// (Produce v12+), and EndTxn keeps the epoch.
func preTV2Client(t *testing.T, b *Broker) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.MaxVersions(kversion.V3_5_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestTxnPartitionVerification(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastTxns)
	adm, _ := adminClient(t, tb.b)
	cl := preTV2Client(t, tb.b)
	createDataTopic(t, adm, "tv", 2, nil)
	initTxnProducerOnce(t, cl, "takes-id-0")
	pid, epoch := initTxnProducer(t, cl, "tv-1")
	addTxnPartition(t, cl, "tv-1", pid, epoch, "tv", 0)

	// Partition 1 was never added: the leader asks the coordinator and
	// refuses the batch, which must not open a transaction there.
	if code := txnProduce(t, cl, "tv-1", "tv", 1, txnDataBatch(pid, epoch, 0, 2)); code != kerr.InvalidTxnState.Code {
		t.Fatalf("batch for a partition not in the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if _, open := tb.b.partitionTxnOpen(t, "tv", 1, pid); open {
		t.Fatal("rejected batch opened a transaction in partition 1")
	}
	// Partition 0 was added: accepted, then the next batch skips the check.
	if code := txnProduce(t, cl, "tv-1", "tv", 0, txnDataBatch(pid, epoch, 0, 2)); code != 0 {
		t.Fatalf("batch for an added partition: %v", kerr.ErrorForCode(code))
	}
	if code := txnProduce(t, cl, "tv-1", "tv", 0, txnDataBatch(pid, epoch, 2, 1)); code != 0 {
		t.Fatalf("second batch of the transaction: %v", kerr.ErrorForCode(code))
	}

	// After the transaction ends, a late batch cannot open a new one.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "tv-1", pid, epoch, true
	// EndTxn below v5 keeps the epoch (no KIP-890 part 2 bump), so the late
	// batch's epoch is still current and only verification stops it.
	if resp, err := end.RequestWith(testCtx(t), cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("end txn: %v %+v", err, resp)
	}
	// Wait for the commit marker: until then a batch still joins the
	// transaction being completed (KIP-890 part 2 closes that gap).
	deadline := time.Now().Add(20 * time.Second)
	for _, open := tb.b.partitionTxnOpen(t, "tv", 0, pid); open; _, open = tb.b.partitionTxnOpen(t, "tv", 0, pid) {
		if time.Now().After(deadline) {
			t.Fatal("commit marker not written")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		code := txnProduce(t, cl, "tv-1", "tv", 0, txnDataBatch(pid, epoch, 3, 1))
		if code == kerr.InvalidTxnState.Code {
			break
		}
		// NOT_ENOUGH_REPLICAS while the markers are pending (retriable).
		if code != kerr.NotEnoughReplicas.Code || time.Now().After(deadline) {
			t.Fatalf("late batch after commit: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, open := tb.b.partitionTxnOpen(t, "tv", 0, pid); open {
		t.Fatal("late batch opened a hanging transaction")
	}
}

func TestTxnPartitionVerificationDisabled(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		fastTxns(c)
		c.DisableTxnPartitionVerification = true
	})
	adm, _ := adminClient(t, tb.b)
	cl := preTV2Client(t, tb.b)
	createDataTopic(t, adm, "tv", 2, nil)
	initTxnProducerOnce(t, cl, "takes-id-0")
	pid, epoch := initTxnProducer(t, cl, "tv-2")
	if code := txnProduce(t, cl, "tv-2", "tv", 1, txnDataBatch(pid, epoch, 0, 2)); code != 0 {
		t.Fatalf("unverified batch with verification off: %v", kerr.ErrorForCode(code))
	}
	if _, open := tb.b.partitionTxnOpen(t, "tv", 1, pid); !open {
		t.Fatal("accepted batch did not open a transaction")
	}
}

// partitionTxnOpen reports the open transaction's first offset of pid in
// topic/partition, if any.
func (b *Broker) partitionTxnOpen(t *testing.T, topic string, partition int32, pid int64) (int64, bool) {
	t.Helper()
	p, code := b.parts.lookup(topic, partition)
	if code != 0 {
		t.Fatalf("lookup %s-%d: %v", topic, partition, kerr.ErrorForCode(code))
	}
	for _, s := range p.log.Producers() {
		if s.ProducerID == pid && s.CurrentTxnStartOffset >= 0 {
			return s.CurrentTxnStartOffset, true
		}
	}
	return -1, false
}

// TestTxnPartitionVerificationPeer: the coordinator is another broker, so
// the leader verifies over the network.
func TestTxnPartitionVerificationPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and two brokers")
	}
	endpoints := metadatatest.StartEmbedded(t)
	var brokers []*testBroker
	for node := int32(1); node <= 2; node++ {
		brokers = append(brokers, startTestBroker(t, endpoints, t.TempDir(), func(c *Config) {
			fastTxns(c)
			c.NodeID, c.OffsetsTopicReplicationFactor = node, 1
		}))
	}
	adm, _ := adminClient(t, brokers[0].b)
	cl := preTV2Client(t, brokers[0].b)
	createDataTopic(t, adm, "tvp", 4, nil)
	initTxnProducerOnce(t, cl, "takes-id-0")
	pid, epoch := initTxnProducer(t, cl, "tvp-1")
	coord := adm.FindTxnCoordinators(testCtx(t), "tvp-1")
	if coord["tvp-1"].Err != nil {
		t.Fatalf("find coordinator: %v", coord["tvp-1"].Err)
	}
	meta, err := adm.Metadata(testCtx(t), "tvp")
	if err != nil {
		t.Fatal(err)
	}
	var remote []int32 // partitions led by the broker that is not the coordinator
	for _, p := range meta.Topics["tvp"].Partitions.Sorted() {
		if p.Leader != coord["tvp-1"].NodeID {
			remote = append(remote, p.Partition)
		}
	}
	if len(remote) < 2 {
		t.Fatalf("partitions led away from coordinator %d: %v", coord["tvp-1"].NodeID, remote)
	}
	addTxnPartition(t, cl, "tvp-1", pid, epoch, "tvp", remote[0])
	// kgo sends a raw Produce to any broker: address the leader.
	leader := cl.Broker(int(meta.Topics["tvp"].Partitions[remote[0]].Leader))
	if code := txnProduce(t, leader, "tvp-1", "tvp", remote[1], txnDataBatch(pid, epoch, 0, 1)); code != kerr.InvalidTxnState.Code {
		t.Fatalf("batch for a partition not in the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	code := txnProduce(t, leader, "tvp-1", "tvp", remote[0], txnDataBatch(pid, epoch, 0, 1))
	if code != 0 {
		t.Fatalf("batch for an added partition: %v (leaders %v)", kerr.ErrorForCode(code), meta.Topics["tvp"].Partitions)
	}
}
