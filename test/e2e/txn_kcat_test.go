package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// TestTxnKcatReadCommitted (librdkafka side): kcat as a
// read_committed consumer sees exactly the committed and plain records, in
// offset order, and stops at the LSO while a transaction is open (not
// showing the open transaction nor anything after it); read_uncommitted
// sees everything; once the open transaction commits, read_committed sees
// it and what followed it.
func TestTxnKcatReadCommitted(t *testing.T) {
	kcat := testkit.NeedBinary(t, "kcat")
	b := StartBroker(t)
	const topic = "txn-kcat"
	createTopic(t, b.Admin(), topic, 1, nil)
	tx := txnClient(t, b, "kcat-txn")
	plain := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))

	runTxn(t, tx, true, txnRecords(topic, "committed-a", 5, 1)...)
	runTxn(t, tx, false, txnRecords(topic, "aborted-b", 5, 1)...)
	produceSync(t, plain, txnRecords(topic, "plain-c", 3, 1)...)
	runTxn(t, tx, true, txnRecords(topic, "committed-d", 5, 1)...)
	before := []string{"committed-a", "plain-c", "committed-d"}

	open := txnClient(t, b, "kcat-open")
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := open.ProduceSync(ctx, txnRecords(topic, "open-e", 5, 1)...).FirstErr(); err != nil {
		t.Fatalf("produce in the open transaction: %v", err)
	}
	produceSync(t, plain, txnRecords(topic, "plain-f", 3, 1)...)

	checkKcat(t, kcat, b, topic, "read_committed", before)
	checkKcat(t, kcat, b, topic, "read_uncommitted",
		[]string{"committed-a", "aborted-b", "plain-c", "committed-d", "open-e", "plain-f"})

	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit the open transaction: %v", err)
	}
	checkKcat(t, kcat, b, topic, "read_committed", append(before, "open-e", "plain-f"))
}

// checkKcat reads the partition with kcat from the beginning to its end
// (the LSO under read_committed) and compares the values with the records
// of the given tags (txnRecords numbering), in order.
func checkKcat(t *testing.T, kcat string, b *Broker, topic, isolation string, tags []string) {
	t.Helper()
	var want []string
	for _, tag := range tags {
		n := 5
		if strings.HasPrefix(tag, "plain-") {
			n = 3
		}
		for _, r := range txnRecords(topic, tag, n, 1) {
			want = append(want, string(r.Value))
		}
	}
	out := runKcat(t, kcat, "", "-b", b.Addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level="+isolation, "-f", "%s\n")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		got = nil
	}
	if d := diffValues(got, want); d != "" {
		t.Fatalf("kcat %s: %s\ngot:\n%s", isolation, d, out)
	}
}
