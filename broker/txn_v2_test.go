package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// finalizedTxnVersion asks b for its finalized transaction.version level
// (-1: not listed).
func finalizedTxnVersion(t *testing.T, cl *kgo.Client) int16 {
	t.Helper()
	resp := requestDirect(t, cl, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if resp.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("finalized features epoch %d: clients would ignore the levels", resp.FinalizedFeaturesEpoch)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel
		}
	}
	return -1
}

// endTxnV5 sends EndTxn (the client's negotiated version, v5 here) and
// returns its code and the producer id and epoch it answers.
func endTxnV5(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) (int16, int64, int16) {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("end txn: %v", err)
	}
	return resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch
}

// txnPartitionsOf lists "topic-partition" of id's ongoing transaction.
func txnPartitionsOf(t *testing.T, cl *kgo.Client, id string) (string, []string) {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
		t.Fatalf("describe %s: %v %+v", id, err, resp)
	}
	s := resp.TransactionStates[0]
	var out []string
	for _, tp := range s.Topics {
		for _, p := range tp.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", tp.Topic, p))
		}
	}
	slices.Sort(out)
	return s.State, out
}

// TestTxnVersion2 (KIP-890 part 2): the broker finalizes transaction.version
// 2; a transactional Produce v12 and a TxnOffsetCommit v5 join the
// transaction without AddPartitionsToTxn / AddOffsetsToTxn; EndTxn v5 bumps
// the epoch, so a delayed EndTxn of the previous transaction and a late
// batch of the old epoch are fenced instead of touching the next one.
func TestTxnVersion2(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastTxns)
	adm, cl := adminClient(t, tb.b)
	if v := finalizedTxnVersion(t, cl); v != 2 {
		t.Fatalf("finalized transaction.version %d, want 2", v)
	}
	createDataTopic(t, adm, "tv2", 2, nil)
	initTxnProducerOnce(t, cl, "takes-id-0")
	const id = "tv2-1"
	pid, e0 := initTxnProducer(t, cl, id)

	// Implicit adds: no AddPartitionsToTxn, no AddOffsetsToTxn.
	if code := txnProduce(t, cl, id, "tv2", 0, txnDataBatch(pid, e0, 0, 2)); code != 0 {
		t.Fatalf("produce v12 without AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = id, "tv2-group", pid, e0
	commit.Generation = -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "tv2"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 2
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(testCtx(t), cl)
	if err != nil || cresp.Version < 5 || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit v5 without AddOffsetsToTxn: %v %+v", err, cresp)
	}
	offsetsTP := fmt.Sprintf("%s-%d", group.OffsetsTopic, tb.b.groups.PartitionFor("tv2-group"))
	if state, parts := txnPartitionsOf(t, cl, id); state != "Ongoing" || !slices.Equal(parts, sortedStrings(offsetsTP, "tv2-0")) {
		t.Fatalf("transaction %s with partitions %v, want Ongoing with %s and tv2-0", state, parts, offsetsTP)
	}

	// EndTxn v5 bumps the epoch; its retry gets the outcome again.
	code, pid1, e1 := endTxnV5(t, cl, id, pid, e0, true)
	if code != 0 || pid1 != pid || e1 != e0+1 {
		t.Fatalf("end txn v5: %v pid %d epoch %d, want epoch %d", kerr.ErrorForCode(code), pid1, e1, e0+1)
	}
	if code, _, e := endTxnV5(t, cl, id, pid, e0, true); code != 0 || e != e1 {
		t.Fatalf("retried commit: %v epoch %d", kerr.ErrorForCode(code), e)
	}
	// The next transaction at the new epoch (sequences restart at 0).
	if code := txnProduce(t, cl, id, "tv2", 1, txnDataBatch(pid, e1, 0, 1)); code != 0 {
		t.Fatalf("first batch of the next transaction: %v", kerr.ErrorForCode(code))
	}
	// A delayed abort of the first transaction is fenced and does not end
	// the second; a late batch of the old epoch is refused.
	if code, _, _ := endTxnV5(t, cl, id, pid, e0, false); code != kerr.ProducerFenced.Code {
		t.Fatalf("delayed EndTxn of the old epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
	if state, parts := txnPartitionsOf(t, cl, id); state != "Ongoing" || !slices.Equal(parts, []string{"tv2-1"}) {
		t.Fatalf("after the delayed EndTxn: %s %v, want the second transaction Ongoing on tv2-1", state, parts)
	}
	testkit.WaitFor(t, 20*time.Second, "condition", func() bool { _, open := tb.b.partitionTxnOpen(t, "tv2", 0, pid); return !open })
	if code := txnProduce(t, cl, id, "tv2", 0, txnDataBatch(pid, e0, 2, 1)); code != kerr.InvalidProducerEpoch.Code &&
		code != kerr.ProducerFenced.Code {
		t.Fatalf("late batch of the old epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if code, _, e2 := endTxnV5(t, cl, id, pid, e1, true); code != 0 || e2 != e1+1 {
		t.Fatalf("commit of the second transaction: %v epoch %d", kerr.ErrorForCode(code), e2)
	}
	got := readAll(t, tb.b.Addr().String(), "tv2", true)
	if n := sumCounts(got); n != 3 {
		t.Fatalf("read_committed sees %d records, want 3 (2 + 1 committed): %v", n, got)
	}
}

// TestTxnVersion1: with TransactionVersion 1 the level is advertised as 1,
// and franz-go's transactions (explicit adds, no epoch bump) still work.
func TestTxnVersion1(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		fastTxns(c)
		c.TransactionVersion = 1
	})
	adm, cl := adminClient(t, tb.b)
	if v := finalizedTxnVersion(t, cl); v != 1 {
		t.Fatalf("finalized transaction.version %d, want 1", v)
	}
	createDataTopic(t, adm, "tin", 1, nil)
	p := txnProducer(t, tb.b.Addr().String(), "tv1-1", time.Minute)
	runTxn(t, p, "c", 5, kgo.TryCommit)
	runTxn(t, p, "a", 4, kgo.TryAbort)
	runTxn(t, p, "c2", 3, kgo.TryCommit)
	if n := sumCounts(readAll(t, tb.b.Addr().String(), "tin", true)); n != 8 {
		t.Fatalf("read_committed sees %d records, want 8", n)
	}
	if d := describeTxn(t, adm, "tv1-1"); d.ProducerEpoch != 0 {
		t.Fatalf("epoch %d after three transactions with transaction.version 1, want 0 (no bump)", d.ProducerEpoch)
	}
}

func sortedStrings(s ...string) []string { slices.Sort(s); return s }

func sumCounts(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
