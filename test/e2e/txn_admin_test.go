package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// TestTxnAdminViews: DescribeTransactions, ListTransactions and
// DescribeProducers as kadm sees them, during and after a transaction: an
// open transaction is Ongoing with its partitions, its timeout and its
// producer id, and each partition reports the producer with the
// transaction's first offset; after the commit the transaction is
// CompleteCommit with no partitions and no partition has a transaction
// open.
func TestTxnAdminViews(t *testing.T) {
	b := StartBroker(t)
	const topic, txnID = "txn-admin", "admin-txn"
	adm := b.Admin()
	createTopic(t, adm, topic, 2, nil)
	cl := txnClient(t, b, txnID, kgo.TransactionTimeout(45*time.Second))
	runTxn(t, cl, true, txnRecords(topic, "warmup", 2, 2)...) // offsets 0 and 1 (marker) on each partition
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 60*time.Second)
	rs := txnRecords(topic, "open", 4, 2)
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	d := describeTxn(t, adm, txnID)
	if d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch != epoch || d.TimeoutMillis != 45000 ||
		len(d.Topics[topic]) != 2 {
		t.Errorf("open transaction described as %+v; want Ongoing, producer %d epoch %d, timeout 45000, partitions 0 and 1 of %s",
			d, pid, epoch, topic)
	}
	if s := listedTxnState(t, adm, txnID); s != "Ongoing" {
		t.Errorf("ListTransactions: %s is %q, want Ongoing", txnID, s)
	}
	if got := txnStartOffsets(t, adm, topic, pid); got[0] != 2 || got[1] != 2 {
		t.Errorf("DescribeProducers: producer %d's transaction starts at %v, want offset 2 on both partitions", pid, got)
	}

	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the transaction to be CompleteCommit", func() bool {
		d = describeTxn(t, adm, txnID)
		return d.State == "CompleteCommit"
	})
	if len(d.Topics) != 0 || d.ProducerID != pid {
		t.Errorf("committed transaction described as %+v; want no partitions, producer %d", d, pid)
	}
	testkit.WaitFor(t, 30*time.Second, "no open transaction on either partition", func() bool {
		got := txnStartOffsets(t, adm, topic, pid)
		return got[0] == -1 && got[1] == -1
	})
	t.Logf("producer %d: epoch %d during the transaction, %d after the commit", pid, epoch, d.ProducerEpoch)
}

func describeTxn(t *testing.T, adm *kadm.Client, txnID string) kadm.DescribedTransaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	d, err := ds.On(txnID, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		t.Fatalf("DescribeTransactions(%s): %v", txnID, err)
	}
	return d
}

func listedTxnState(t *testing.T, adm *kadm.Client, txnID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("ListTransactions: %v", err)
	}
	l, ok := ls[txnID]
	if !ok {
		return fmt.Sprintf("not listed (listed: %v)", ls.TransactionalIDs())
	}
	return l.State
}

// txnStartOffsets is producer pid's CurrentTxnStartOffset per partition of
// topic (-2 where the partition does not list the producer).
func txnStartOffsets(t *testing.T, adm *kadm.Client, topic string, pid int64) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatalf("DescribeProducers: %v", err)
	}
	out := map[int32]int64{0: -2, 1: -2}
	ds.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Fatalf("DescribeProducers %s-%d: %v", topic, p.Partition, p.Err)
		}
	})
	ds.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == pid {
			out[p.Partition] = p.CurrentTxnStartOffset
		}
	})
	return out
}
