package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// fastTxns: few transaction state partitions, a quick timeout clock.
func fastTxns(c *Config) {
	fastGroups(c)
	c.Txn = txn.Config{Partitions: 4, TickInterval: 50 * time.Millisecond}
}

func txnProducer(t *testing.T, addr, id string, timeout time.Duration) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.TransactionTimeout(timeout),
		kgo.DefaultProduceTopic("tin"), kgo.RecordRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runTxn produces n records in a transaction and ends it.
func runTxn(t *testing.T, cl *kgo.Client, prefix string, n int, commit kgo.TransactionEndTry) {
	t.Helper()
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
	}
	if err := cl.EndTransaction(ctx, commit); err != nil {
		t.Fatalf("end transaction: %v", err)
	}
}

// readAll consumes topic from the start until idle, with the isolation
// level, and counts each value.
func readAll(t *testing.T, addr, topic string, committed bool) map[string]int {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	for idle := 0; idle < 3; {
		ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
		if n == 0 {
			idle++
		}
	}
	return seen
}

func describeTxn(t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := adm.DescribeTransactions(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %v %v", id, ok, d.Err)
	}
	return d
}

func TestTransactionsCommitAbortTimeout(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastTxns)
	adm, plain := adminClient(t, tb.b)
	if _, err := adm.CreateTopic(testCtx(t), 2, 1, nil, "tin"); err != nil {
		t.Fatal(err)
	}
	addr := tb.b.Addr().String()
	cl := txnProducer(t, addr, "tx1", 10*time.Second)
	runTxn(t, cl, "c1", 5, kgo.TryCommit)
	runTxn(t, cl, "a1", 3, kgo.TryAbort)
	runTxn(t, cl, "c2", 2, kgo.TryCommit)

	d := describeTxn(t, adm, "tx1")
	if d.State != "CompleteCommit" && d.State != "PrepareCommit" {
		t.Fatalf("state after commit: %s", d.State)
	}
	// An abandoned transaction is aborted by the coordinator after its
	// timeout, with an epoch bump fencing the producer.
	abandoned := txnProducer(t, addr, "tx2", time.Second)
	if err := abandoned.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := abandoned.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("lost-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := describeTxn(t, adm, "tx2")
	deadline := time.Now().Add(20 * time.Second)
	for d := before; d.State != "CompleteAbort"; d = describeTxn(t, adm, "tx2") {
		if time.Now().After(deadline) {
			t.Fatalf("abandoned transaction never aborted: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after := describeTxn(t, adm, "tx2"); after.ProducerEpoch <= before.ProducerEpoch {
		t.Fatalf("timeout abort did not bump the epoch: %d -> %d", before.ProducerEpoch, after.ProducerEpoch)
	}

	committed := readAll(t, addr, "tin", true)
	for _, v := range []string{"c1-0", "c1-4", "c2-0", "c2-1"} {
		if committed[v] != 1 {
			t.Errorf("read_committed misses %s", v)
		}
	}
	for _, v := range []string{"a1-0", "a1-2", "lost-0"} {
		if committed[v] != 0 {
			t.Errorf("read_committed sees aborted %s", v)
		}
	}
	if len(committed) != 7 {
		t.Errorf("read_committed saw %d records: %v", len(committed), committed)
	}
	if all := readAll(t, addr, "tin", false); all["a1-0"] != 1 || all["lost-0"] != 1 || len(all) != 11 {
		t.Errorf("read_uncommitted saw %d records: %v", len(all), all)
	}
	producers, err := adm.DescribeProducers(testCtx(t), kadm.TopicsSet{"tin": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	producers.EachProducer(func(p kadm.DescribedProducer) { ids[p.ProducerID] = true })
	if d := describeTxn(t, adm, "tx1"); !ids[d.ProducerID] {
		t.Errorf("DescribeProducers misses tx1's producer %d: %v", d.ProducerID, ids)
	}
	listed, err := adm.ListTransactions(testCtx(t), nil, []string{"CompleteAbort"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["tx2"]; !ok || len(listed) != 1 {
		t.Errorf("list CompleteAbort: %v", listed.TransactionalIDs())
	}
	req := kmsg.NewPtrListTransactionsRequest()
	req.TransactionalIDPattern = kmsg.StringPtr("tx[0-9]")
	resp, err := req.RequestWith(testCtx(t), plain)
	if err != nil || resp.ErrorCode != 0 || len(resp.TransactionStates) != 2 {
		t.Errorf("list by pattern: %v %+v", err, resp)
	}
	req.TransactionalIDPattern = kmsg.StringPtr("tx(")
	if resp, err := req.RequestWith(testCtx(t), plain); err != nil || resp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Errorf("bad pattern: %v %+v", err, resp)
	}
}

// TestGroupTransactSession: consume-transform-produce with the offsets
// committed in the transaction (TxnOffsetCommit + markers on
// __consumer_offsets): each input record is in the output exactly once and
// the group's committed offsets cover the input.
func TestGroupTransactSession(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastTxns)
	adm, plain := adminClient(t, tb.b)
	ctx := testCtx(t)
	for _, topic := range []string{"gin", "gout"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	const n = 60
	produceN(t, plain, "gin", n)
	addr := tb.b.Addr().String()
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("gts-tx"),
		kgo.ConsumerGroup("gts"), kgo.ConsumeTopics("gin"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.TransactionTimeout(10*time.Second),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond), kgo.RequireStableFetchOffsets())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied := 0
	for copied < n && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollFetches(pctx)
		cancel()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			got++
			sess.Produce(ctx, &kgo.Record{Topic: "gout", Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			copied += got
		}
	}
	out := readAll(t, addr, "gout", true)
	if len(out) != n {
		t.Fatalf("output holds %d distinct records, want %d", len(out), n)
	}
	for v, c := range out {
		if c != 1 {
			t.Errorf("%s in the output %d times", v, c)
		}
	}
	offsets, err := adm.FetchOffsets(ctx, "gts")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != n {
		t.Fatalf("committed offsets sum to %d, want %d", total, n)
	}
}

// TestTransactionsTwoBrokers: partitions led by both brokers, so the
// coordinator sends WriteTxnMarkers to a peer as well as to itself.
func TestTransactionsTwoBrokers(t *testing.T) {
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
	if _, err := adm.CreateTopic(testCtx(t), 4, 1, nil, "tin"); err != nil {
		t.Fatal(err)
	}
	waitLeading(t, adm, "tin")
	addr := brokers[0].b.Addr().String()
	cl := txnProducer(t, addr, "tx-two", 10*time.Second)
	for round := 0; round < 3; round++ {
		runTxn(t, cl, fmt.Sprintf("c%d", round), 8, kgo.TryCommit)
		runTxn(t, cl, fmt.Sprintf("a%d", round), 8, kgo.TryAbort)
	}
	committed := readAll(t, addr, "tin", true)
	if len(committed) != 24 {
		t.Fatalf("read_committed saw %d records, want 24: %v", len(committed), committed)
	}
	for v, c := range committed {
		if v[0] != 'c' || c != 1 {
			t.Errorf("read_committed: %s x%d", v, c)
		}
	}
	meta, err := adm.Metadata(testCtx(t), "tin")
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[int32]bool{}
	for _, p := range meta.Topics["tin"].Partitions {
		nodes[p.Leader] = true
	}
	if len(nodes) != 2 {
		t.Fatalf("partitions led by %v: the test needs both brokers", nodes)
	}
}
