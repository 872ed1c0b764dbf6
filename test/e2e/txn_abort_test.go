package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// abandonTimeout is transaction.timeout.ms of the abandoned transaction;
// abortWait bounds the coordinator's proactive abort (Kafka checks every
// 10 s by default).
const (
	abandonTimeout = 3 * time.Second
	abortWait      = 60 * time.Second
)

// TestTxnAbortedAndAbandonedInvisible: on one broker,
// a transaction aborted by its client and one whose client is killed
// mid-transaction (transaction.timeout.ms 3 s, aborted by the coordinator)
// leave their records in the log: read_uncommitted sees them, no
// read_committed consumer does (neither one reading all along nor one
// reading at the end). While the abandoned transaction is open
// the LSO (ListOffsets read_committed) stays at its first offset, so a
// transaction committed meanwhile becomes visible only after the timeout
// abort; then it and later ones are visible, exactly as committed.
func TestTxnAbortedAndAbandonedInvisible(t *testing.T) {
	b := StartBroker(t)
	const topic, partitions = "txn-visibility", 2
	adm := b.Admin()
	createTopic(t, adm, topic, partitions, nil)
	live := startLiveReader(t, b, topic)
	var committed, all producedLog

	aborter := txnClient(t, b, "vis-aborter")
	all.add(runTxn(t, aborter, false, txnRecords(topic, "aborted", 20, partitions)...)...)
	committer := txnClient(t, b, "vis-committer")
	rs := runTxn(t, committer, true, txnRecords(topic, "committed-before", 20, partitions)...)
	committed.add(rs...)
	all.add(rs...)

	firstOpen, killedAt := abandonTxn(t, b, topic, partitions, &all)
	lso, hw := stableOffsets(t, adm, topic), endOffsets(t, adm, topic)
	if time.Since(killedAt) < abandonTimeout*2/3 {
		for p := int32(0); p < partitions; p++ {
			if lso[p] != firstOpen[p] || hw[p] <= lso[p] {
				t.Errorf("partition %d with a transaction open from offset %d: LSO %d, HW %d", p, firstOpen[p], lso[p], hw[p])
			}
		}
	} else {
		t.Logf("LSO check skipped: %v passed since the kill", time.Since(killedAt))
	}
	rs = runTxn(t, committer, true, txnRecords(topic, "committed-during", 20, partitions)...)
	committed.add(rs...)
	all.add(rs...)

	testkit.WaitFor(t, abortWait, "the coordinator to abort the abandoned transaction (LSO = HW)", func() bool {
		lso, hw := stableOffsets(t, adm, topic), endOffsets(t, adm, topic)
		for p := int32(0); p < partitions; p++ {
			if lso[p] != hw[p] {
				return false
			}
		}
		return true
	})
	t.Logf("abandoned transaction aborted %v after the client was killed", time.Since(killedAt).Round(100*time.Millisecond))

	// The id is usable again, and so is the committer.
	reuse := txnClient(t, b, "vis-abandoned")
	rs = runTxn(t, reuse, true, txnRecords(topic, "committed-reuse", 10, partitions)...)
	committed.add(rs...)
	all.add(rs...)
	rs = runTxn(t, committer, true, txnRecords(topic, "committed-after", 20, partitions)...)
	committed.add(rs...)
	all.add(rs...)

	checkIsolatedReads(t, b, topic, partitions, &committed, &all)
	testkit.WaitFor(t, 30*time.Second, "the live read_committed consumer to read everything", func() bool {
		live.mu.Lock()
		defer live.mu.Unlock()
		return len(live.at) >= len(committed.values(0))+len(committed.values(1))
	})
	for p := int32(0); p < partitions; p++ {
		if d := diffValues(live.values(p), committed.values(p)); d != "" {
			t.Errorf("partition %d: a read_committed consumer reading all along: %s", p, d)
		}
	}
}

// abandonTxn opens a transaction with id vis-abandoned and a 3 s timeout,
// writes records to every partition (acknowledged, so in the log), then
// kills the client: connections reset, no EndTxn ever. It returns the first
// offset of the open transaction per partition and when the client died.
func abandonTxn(t *testing.T, b *Broker, topic string, partitions int32, all *producedLog) (map[int32]int64, time.Time) {
	t.Helper()
	var ct testkit.ConnTracker
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.Dialer(ct.Dial), kgo.TransactionalID("vis-abandoned"),
		kgo.TransactionTimeout(abandonTimeout), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := txnRecords(topic, "abandoned", 20, partitions)
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce in the transaction to abandon: %v", err)
	}
	ct.Kill()
	killedAt := time.Now()
	go cl.Close() // fails whatever is left; sends nothing (every dial fails)
	all.add(rs...)
	first := map[int32]int64{}
	for _, r := range rs {
		if o, ok := first[r.Partition]; !ok || r.Offset < o {
			first[r.Partition] = r.Offset
		}
	}
	return first, killedAt
}

// checkIsolatedReads: read_committed returns exactly the committed records
// of each partition, in offset order; read_uncommitted returns every record
// produced, aborted ones included.
func checkIsolatedReads(t *testing.T, b *Broker, topic string, partitions int32, committed, all *producedLog) {
	t.Helper()
	rc := readIsolated(t, b, topic, true, 60*time.Second)
	ru := readIsolated(t, b, topic, false, 60*time.Second)
	for p := int32(0); p < partitions; p++ {
		if d := diffValues(rc.Values(p), committed.values(p)); d != "" {
			t.Errorf("partition %d read_committed: %s", p, d)
		}
		if d := diffValues(ru.Values(p), all.values(p)); d != "" {
			t.Errorf("partition %d read_uncommitted: %s", p, d)
		}
		for _, v := range rc.Values(p) {
			if strings.HasPrefix(v, "aborted-") || strings.HasPrefix(v, "abandoned-") {
				t.Errorf("partition %d: read_committed returned %q", p, v)
				break
			}
		}
	}
	t.Logf("read_committed: %d+%d records, markers %v; read_uncommitted: %d+%d records",
		len(rc.Records[0]), len(rc.Records[1]), rc.Controls, len(ru.Records[0]), len(ru.Records[1]))
}
