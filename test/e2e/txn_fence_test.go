package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnZombieFenced: a second producer with the same
// transactional id fences the first (InitProducerId bumps the epoch and
// aborts the first one's open transaction). The zombie's later produce and
// its commit fail, nothing it wrote is ever visible to read_committed, and
// its late produce is not even in the log; the new producer's transaction
// commits normally.
func TestTxnZombieFenced(t *testing.T) {
	b := StartBroker(t)
	const topic, txnID = "txn-fence", "fence-id"
	createTopic(t, b.Admin(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	zombie := txnClient(t, b, txnID, kgo.RecordRetries(3))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, txnRecords(topic, "zombie-early", 3, 1)...).FirstErr(); err != nil {
		t.Fatalf("zombie's first produce: %v", err)
	}

	fresh := txnClient(t, b, txnID)
	runTxn(t, fresh, true, txnRecords(topic, "fresh", 3, 1)...)

	lateErr := zombie.ProduceSync(ctx, txnRecords(topic, "zombie-late", 3, 1)...).FirstErr()
	endErr := zombie.EndTransaction(ctx, kgo.TryCommit)
	t.Logf("zombie after the fence: produce %v; commit %v", lateErr, endErr)
	if lateErr == nil && endErr == nil {
		t.Fatal("the fenced producer produced and committed without an error")
	}

	runTxn(t, fresh, true, txnRecords(topic, "fresh-again", 3, 1)...)
	var want []string
	for _, tag := range []string{"fresh", "fresh-again"} {
		for _, r := range txnRecords(topic, tag, 3, 1) {
			want = append(want, string(r.Value))
		}
	}
	if d := diffValues(readIsolated(t, b, topic, true, 60*time.Second).Values(0), want); d != "" {
		t.Errorf("read_committed: %s", d)
	}
	all := readIsolated(t, b, topic, false, 60*time.Second).Values(0)
	for _, r := range txnRecords(topic, "zombie-late", 3, 1) {
		if slices.Contains(all, string(r.Value)) {
			t.Errorf("the fenced producer's late record %q is in the log", r.Value)
		}
	}
	if !slices.Contains(all, "zombie-early-000") {
		t.Errorf("read_uncommitted lacks the zombie's acknowledged (then aborted) record: %v", all)
	}
}
