package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// Names and sizes of the consume-transform-produce acceptance test.
const (
	eosInput      = "eos-in"
	eosOutput     = "eos-out"
	eosGroup      = "eos-group"
	eosTxnID      = "eos-transformer"
	eosPartitions = 3
	eosKeys       = 12
	eosRate       = 150 // input records per second
	eosRounds     = 6
	eosPollMax    = 100 // records per transaction at most
)

// TestTxnConsumeTransformProduceUnderLeaderKills: a
// franz-go GroupTransactSession copies a keyed input topic to an output
// topic (3 partitions each, RF 3, min.insync.replicas 2), committing its
// consumer offsets in each transaction, while the leaders of input-0,
// output-0 and the __transaction_state partition of its transactional id
// are SIGKILLed and restarted in turn; on even rounds the transformer
// itself also "crashes" with a transaction open (records written, no EndTxn,
// connections reset) and a new session with the same transactional id
// fences it. Afterwards a read_committed read of the output holds every
// input record exactly once, each key's records in input order (and a
// read_committed consumer reading all along saw no record twice and none
// out of order), while a read_uncommitted read holds the crashed
// transactions' copies too; the input itself passes the history checker.
func TestTxnConsumeTransformProduceUnderLeaderKills(t *testing.T) {
	defer timed(t, "TestTxnConsumeTransformProduceUnderLeaderKills")()
	c := Start(t, Config{})
	replicatedTopic(t, c, eosInput, eosPartitions, nil)
	replicatedTopic(t, c, eosOutput, eosPartitions, nil)
	in := startKeyedProducer(t, c, eosInput, eosPartitions, eosKeys, eosRate)
	live := startLiveReader(t, c, eosOutput, eosPartitions)
	tr := startTransformer(t, c)
	tr.waitCommits(c, 5, 2*progressTimeout)
	txnPart := txnStatePartition(eosTxnID)
	checkTxnCoordinator(t, c, eosTxnID, txnPart)

	rounds := eosRounds
	if testing.Short() {
		rounds = 3
	}
	targets := []struct {
		topic string
		p     int32
	}{{eosInput, 0}, {eosOutput, 0}, {txnStateTopic, txnPart}}
	for round := 1; round <= rounds; round++ {
		done := timed(t, fmt.Sprintf("round %d", round))
		target := targets[(round-1)%len(targets)]
		before := mustPartition(t, c, target.topic, target.p)
		if round%2 == 0 {
			tr.crashNext.Store(true)
			tr.waitCrash(c, progressTimeout)
		}
		c.Kill(before.Leader)
		after := waitNewLeader(t, c, target.topic, target.p, before.Leader, before.LeaderEpoch)
		t.Logf("round %d: killed %d, leader of %s-%d (epoch %d); new leader %d (epoch %d)",
			round, before.Leader, target.topic, target.p, before.LeaderEpoch, after.Leader, after.LeaderEpoch)
		c.Restart(before.Leader)
		waitEOSInSync(t, c, before.Leader, txnPart)
		tr.waitCommits(c, 3, 2*progressTimeout)
		in.waitAcked(c, 50, progressTimeout)
		done()
	}

	in.stop()
	input := readTopic(t, c, eosInput, eosPartitions, false, finalReadTimeout)
	in.checkHistory(t, input)
	tr.waitCaughtUp(c, input.Ends, 2*catchUpTimeout)
	tr.stop()
	output := readTopic(t, c, eosOutput, eosPartitions, true, finalReadTimeout)
	raw := readTopic(t, c, eosOutput, eosPartitions, false, finalReadTimeout)
	t.Logf("input %d records; transformer: %s; output read_committed %d records, read_uncommitted %d, %v markers",
		len(input.All()), tr.stats(), len(output.All()), len(raw.All()), output.Controls)
	if len(input.All()) < 1000 {
		t.Errorf("only %d input records: too little traffic for the test to mean much", len(input.All()))
	}
	if tr.crashes.Load() > 0 && len(raw.All()) <= len(output.All()) {
		t.Errorf("%d transformer crashes left records in open transactions, yet read_uncommitted holds %d records "+
			"and read_committed %d: nothing was filtered", tr.crashes.Load(), len(raw.All()), len(output.All()))
	}
	if err := checkExactlyOnce(input.All(), output.All(), true); err != nil {
		t.Errorf("read_committed output is not the input exactly once: %v", err)
	}
	seen, err := live.records(func(v string) string { key, _, _ := strings.Cut(v, "-"); return key })
	if err == nil {
		err = checkExactlyOnce(input.All(), seen, false)
	}
	if err != nil {
		t.Errorf("a read_committed consumer reading during the faults saw %d records: %v", len(seen), err)
	}
	t.Logf("live read_committed consumer saw %d records", len(seen))
}

// waitEOSInSync waits until every input and output partition has all three
// replicas in sync and the restarted broker is back in the ISR of the
// transaction log and group offsets partitions, so that the next kill
// leaves two in sync everywhere.
func waitEOSInSync(t *testing.T, c *Cluster, restarted, txnPart int32) {
	t.Helper()
	for p := int32(0); p < eosPartitions; p++ {
		waitISR(t, c, eosInput, p, []int32{1, 2, 3})
		waitISR(t, c, eosOutput, p, []int32{1, 2, 3})
	}
	waitISRContains(t, c, txnStateTopic, txnPart, restarted)
	// The group's offsets partition (same mapping, 50 partitions) too.
	waitISRContains(t, c, "__consumer_offsets", txnStatePartition(eosGroup), restarted)
}

// checkTxnCoordinator: FindCoordinator (key type 1) names the leader of the
// id's __transaction_state partition, as in Kafka, and that partition is
// replicated on every broker.
func checkTxnCoordinator(t *testing.T, c *Cluster, txnID string, part int32) {
	t.Helper()
	m := waitISR(t, c, txnStateTopic, part, []int32{1, 2, 3})
	c.WaitFor(fmt.Sprintf("FindCoordinator(%s) to name broker %d, leader of %s-%d", txnID, m.Leader, txnStateTopic, part),
		electionTimeout, func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			adm, closeAdm := freshAdmin(c)
			defer closeAdm()
			for _, r := range adm.FindTxnCoordinators(ctx, txnID) {
				return r.Err == nil && r.NodeID == m.Leader, fmt.Sprintf("node %d, err %v", r.NodeID, r.Err)
			}
			return false, "no answer"
		})
}

// transformer runs the consume-transform-produce loop in a goroutine. A
// session whose Begin or End fails is closed and replaced by a new one with
// the same transactional id, as a restarted application would do; the new
// InitProducerId fences the old producer and aborts what it left open.
type transformer struct {
	t        *testing.T
	c        *Cluster
	stopCh   chan struct{}
	done     chan struct{}
	commits  atomic.Int64
	aborts   atomic.Int64
	sessions atomic.Int64
	crashes  atomic.Int64
	// crashNext makes the next transaction end in a crash (errCrash).
	crashNext atomic.Bool
	records   atomic.Int64 // records produced in committed transactions
	errs      struct {
		sync.Mutex
		first  []string
		logged int
	}
}

func startTransformer(t *testing.T, c *Cluster) *transformer {
	tr := &transformer{t: t, c: c, stopCh: make(chan struct{}), done: make(chan struct{})}
	go tr.run()
	t.Cleanup(tr.stop)
	return tr
}

func (tr *transformer) stopped() bool {
	select {
	case <-tr.stopCh:
		return true
	default:
		return false
	}
}

func (tr *transformer) stop() {
	if !tr.stopped() {
		close(tr.stopCh)
	}
	<-tr.done
}

func (tr *transformer) noteErr(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	tr.errs.Lock()
	defer tr.errs.Unlock()
	if tr.errs.logged++; tr.errs.logged <= 60 {
		tr.t.Logf("transformer: %s", msg)
	}
	if len(tr.errs.first) < 8 {
		tr.errs.first = append(tr.errs.first, msg)
	}
}

func (tr *transformer) stats() string {
	tr.errs.Lock()
	defer tr.errs.Unlock()
	return fmt.Sprintf("%d sessions (%d crashed), %d committed transactions (%d records), %d aborted; first errors: [%s]",
		tr.sessions.Load(), tr.crashes.Load(), tr.commits.Load(), tr.records.Load(), tr.aborts.Load(), strings.Join(tr.errs.first, "; "))
}

// errCrash ends a session as if its process died mid-transaction.
var errCrash = errors.New("transformer crashed mid-transaction")

func (tr *transformer) run() {
	defer close(tr.done)
	for !tr.stopped() {
		var ct testkit.ConnTracker
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(tr.c.Addrs()...),
			kgo.Dialer(ct.Dial),
			kgo.RequestTimeoutOverhead(5*time.Second),
			kgo.RetryTimeout(60*time.Second),
			kgo.MetadataMinAge(100*time.Millisecond),
			kgo.TransactionalID(eosTxnID),
			kgo.TransactionTimeout(20*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ConsumerGroup(eosGroup),
			kgo.ConsumeTopics(eosInput),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), // a crashed member leaves the group soon
			kgo.HeartbeatInterval(time.Second),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.FetchMaxWait(300*time.Millisecond),
		)
		if err != nil {
			tr.noteErr("new session: %v", err)
			time.Sleep(time.Second)
			continue
		}
		tr.sessions.Add(1)
		err = tr.loop(sess)
		switch {
		case errors.Is(err, errCrash):
			ct.Kill()       // connections reset, no EndTxn, no LeaveGroup
			go sess.Close() // only releases the client's resources
			continue
		case err != nil:
			tr.noteErr("session %d ends: %v", tr.sessions.Load(), err)
		}
		sess.Close()
	}
}

// loop polls, copies each poll's records in one transaction and ends it,
// until stop (nil) or a Begin/End error.
func (tr *transformer) loop(sess *kgo.GroupTransactSession) error {
	for !tr.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := sess.PollRecords(ctx, eosPollMax)
		cancel()
		if fetches.IsClientClosed() {
			return errors.New("client closed")
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				tr.noteErr("fetch %s-%d: %v", topic, p, err)
			}
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := tr.transact(sess, recs); err != nil {
			return err
		}
	}
	return nil
}

func (tr *transformer) transact(sess *kgo.GroupTransactSession, recs []*kgo.Record) error {
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e := kgo.AbortingFirstErrPromise(sess.Client())
	for _, r := range recs {
		out := &kgo.Record{Topic: eosOutput, Partition: r.Partition, Key: r.Key, Value: r.Value}
		sess.Produce(ctx, out, e.Promise())
	}
	produceErr := e.Err() // waits for every record's outcome
	if produceErr == nil && tr.crashNext.CompareAndSwap(true, false) {
		tr.crashes.Add(1)
		return errCrash // the records are in the log, in an open transaction
	}
	committed, err := sess.End(ctx, kgo.TransactionEndTry(produceErr == nil))
	if err != nil {
		return fmt.Errorf("end (produce error %v): %w", produceErr, err)
	}
	if committed {
		tr.commits.Add(1)
		tr.records.Add(int64(len(recs)))
	} else {
		tr.aborts.Add(1)
		tr.noteErr("transaction of %d records aborted (produce error %v)", len(recs), produceErr)
	}
	return nil
}

// waitCommits waits until n more transactions than now have committed.
func (tr *transformer) waitCommits(c *Cluster, n int64, timeout time.Duration) {
	tr.t.Helper()
	target := tr.commits.Load() + n
	c.WaitFor(fmt.Sprintf("%d more committed transactions", n), timeout, func() (bool, string) {
		return tr.commits.Load() >= target, tr.stats()
	})
}

// waitCrash waits until the crash asked for by crashNext happened.
func (tr *transformer) waitCrash(c *Cluster, timeout time.Duration) {
	tr.t.Helper()
	c.WaitFor("the transformer to crash mid-transaction", timeout, func() (bool, string) {
		return !tr.crashNext.Load(), tr.stats()
	})
}

// waitCaughtUp waits until the group's committed offsets reach ends.
func (tr *transformer) waitCaughtUp(c *Cluster, ends map[int32]int64, timeout time.Duration) {
	tr.t.Helper()
	c.WaitFor(fmt.Sprintf("group %s to commit offsets %v", eosGroup, ends), timeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		adm, closeAdm := freshAdmin(c)
		defer closeAdm()
		resp, err := adm.FetchOffsets(ctx, eosGroup)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		got := map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Topic == eosInput {
				got[o.Partition] = o.At
			}
		})
		for p, end := range ends {
			if got[p] < end {
				return false, fmt.Sprintf("committed %v; %s", got, tr.stats())
			}
		}
		return true, ""
	})
}
