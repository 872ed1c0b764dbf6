package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// Sizes of the tiered transactional data.
const (
	txnTierPartitions   = 2
	txnTierRounds       = 90
	txnTierValueBytes   = 1024
	txnTierSegmentBytes = 65536
	txnTierLocalBytes   = 131072
)

// TestTxnTieredReadCommitted: interleaved transactions
// of two producers (some committed, some aborted) and plain records fill a
// topic with 64 KiB segments. read_committed returns exactly the committed
// and plain records, and read_uncommitted everything, first while every
// segment is still on local disk (but already uploaded), then, after local
// retention shrank to 128 KiB and a restart emptied the caches, from the
// MinIO bucket: the aborted transactions of a segment object must filter
// the cold read exactly as the local index filters the hot one.
func TestTxnTieredReadCommitted(t *testing.T) {
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m)
	const topic = "txn-tiered"
	createTopic(t, b.Admin(), topic, txnTierPartitions, map[string]string{
		"internal.segment.bytes": fmt.Sprint(txnTierSegmentBytes), "local.retention.bytes": "1073741824", "retention.ms": "-1"})
	var committed, all producedLog
	produceInterleavedTxns(t, b, topic, &committed, &all)

	testkit.WaitFor(t, 90*time.Second, "every sealed segment uploaded", func() bool {
		return allSealedUploaded(t, b, topic, txnTierPartitions)
	})
	for p, s := range fetchTierStatus(t, b, topic) {
		if s.LocalStart != 0 {
			t.Fatalf("partition %d: local log starts at %d before local retention was shrunk", p, s.LocalStart)
		}
	}
	checkIsolatedReads(t, b, topic, txnTierPartitions, &committed, &all)

	alterTopicConfig(t, b.Admin(), topic, "local.retention.bytes", fmt.Sprint(txnTierLocalBytes))
	ends := endOffsets(t, b.Admin(), topic)
	testkit.WaitFor(t, 90*time.Second, "most of each partition only in the bucket", func() bool {
		for p, s := range fetchTierStatus(t, b, topic) {
			if s.LocalStart <= ends[p]/2 {
				return false
			}
		}
		return true
	})
	b.Restart()
	before := metricSum(t, b, "strata_cold_gets_total")
	checkIsolatedReads(t, b, topic, txnTierPartitions, &committed, &all)
	if after := metricSum(t, b, "strata_cold_gets_total"); after <= before {
		t.Fatalf("the reads made no bucket GET (strata_cold_gets_total %v -> %v): they were not cold", before, after)
	}
}

// produceInterleavedTxns runs txnTierRounds rounds; in each, producers A
// and B both open a transaction, write to every partition, a plain
// producer writes too, then A commits unless round%3 == 0 and B commits on
// even rounds. Values are 1 KiB and incompressible.
func produceInterleavedTxns(t *testing.T, b *Broker, topic string, committed, all *producedLog) {
	t.Helper()
	a, bb := txnClient(t, b, "tier-a"), txnClient(t, b, "tier-b")
	plain := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rng := rand.New(rand.NewPCG(6, 6))
	value := func(tag string, round, i int) []byte {
		v := fmt.Appendf(nil, "%s-%03d-%d-", tag, round, i)
		for len(v) < txnTierValueBytes {
			v = append(v, byte('a'+rng.IntN(26)))
		}
		return v
	}
	records := func(tag string, round, n int) []*kgo.Record {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % txnTierPartitions), Value: value(tag, round, i)})
		}
		return rs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for round := range txnTierRounds {
		for _, cl := range []*kgo.Client{a, bb} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatalf("round %d: begin: %v", round, err)
			}
		}
		ra, rb, rp := records("a", round, 6), records("b", round, 6), records("plain", round, 2)
		for i := range ra { // interleave the two transactions batch by batch
			for _, step := range []struct {
				cl *kgo.Client
				r  *kgo.Record
			}{{a, ra[i]}, {bb, rb[i]}} {
				if err := step.cl.ProduceSync(ctx, step.r).FirstErr(); err != nil {
					t.Fatalf("round %d: produce: %v", round, err)
				}
			}
		}
		if err := plain.ProduceSync(ctx, rp...).FirstErr(); err != nil {
			t.Fatalf("round %d: plain produce: %v", round, err)
		}
		commitA, commitB := round%3 != 0, round%2 == 0
		for _, end := range []struct {
			cl     *kgo.Client
			commit bool
			rs     []*kgo.Record
		}{{a, commitA, ra}, {bb, commitB, rb}} {
			if err := end.cl.EndTransaction(ctx, kgo.TransactionEndTry(end.commit)); err != nil {
				t.Fatalf("round %d: end transaction: %v", round, err)
			}
			all.add(end.rs...)
			if end.commit {
				committed.add(end.rs...)
			}
		}
		all.add(rp...)
		committed.add(rp...)
	}
}

// alterTopicConfig sets one topic config and fails t on any error.
func alterTopicConfig(t *testing.T, adm *kadm.Client, topic, name, value string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}}, topic)
	if err := alterErr(resp, err, topic); err != nil {
		t.Fatalf("alter %s=%s on %s: %v", name, value, topic, err)
	}
}
