package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/test/history"
)

// Bounds and shape of the soak's transactions.
const (
	txnMaxRecords   = 12               // records per transaction: 1..txnMaxRecords
	txnStepTimeout  = 30 * time.Second // a flush, an abort of buffered records, an EndTxn
	txnTimeout      = 10 * time.Second // transaction.timeout.ms: an abandoned transaction aborts after it
	txnMaxPause     = 100 * time.Millisecond
	txnAbortPercent = 20 // of the transactions that could commit, these abort
	txnCrashPercent = 5  // ... and these are abandoned open by a "crashing" producer
)

// txnProducer runs transactions of a few records each over a topic's
// partitions with one transactional id, committing most, aborting some and
// now and then "crashing" with one open (connections reset, no EndTxn),
// after which a new session with the same id fences the old one. A session
// whose EndTxn or Begin fails is replaced the same way. Every attempt and
// every transaction's outcome go into H: committed when EndTxn(commit)
// succeeded, aborted when no commit was asked for, unknown when a commit
// was asked for and not confirmed.
type txnProducer struct {
	c          *Cluster
	h          *history.History
	topic      string
	partitions int32
	id         string
	rng        *rand.Rand // decisions only; its own stream of the soak's seed
	stop       chan struct{}
	done       chan struct{}

	sessions, committed, aborted, unknown, crashes atomic.Int64
	errs                                           struct {
		sync.Mutex
		first []string
	}
}

// errSessionOver ends a producer session: a crash, or a client whose
// transaction state can no longer be trusted.
var errSessionOver = errors.New("transactional session over")

// startTxnProducer starts producer number n of the soak (its decisions are
// stream n of seed).
func startTxnProducer(c *Cluster, h *history.History, topic string, partitions int32, n int, seed int64) *txnProducer {
	tp := &txnProducer{c: c, h: h, topic: topic, partitions: partitions, id: fmt.Sprintf("soak-txn%d", n),
		rng: rand.New(rand.NewPCG(uint64(seed), 0x7c40+uint64(n))), stop: make(chan struct{}), done: make(chan struct{})}
	go tp.run()
	c.t.Cleanup(tp.finish)
	return tp
}

func (tp *txnProducer) stopped() bool {
	select {
	case <-tp.stop:
		return true
	default:
		return false
	}
}

// finish lets the current transaction end and stops (idempotent).
func (tp *txnProducer) finish() {
	if !tp.stopped() {
		close(tp.stop)
	}
	<-tp.done
}

func (tp *txnProducer) run() {
	defer close(tp.done)
	for !tp.stopped() {
		var ct testkit.ConnTracker
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(tp.c.Addrs()...),
			kgo.Dialer(ct.Dial),
			kgo.RequestTimeoutOverhead(5*time.Second),
			kgo.RetryTimeout(60*time.Second),
			kgo.MetadataMinAge(100*time.Millisecond),
			kgo.TransactionalID(tp.id),
			kgo.TransactionTimeout(txnTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		)
		if err != nil {
			tp.noteErr("new client: %v", err)
			time.Sleep(time.Second)
			continue
		}
		session := tp.sessions.Add(1)
		err = tp.session(cl, &ct, session)
		if !errors.Is(err, errCrash) {
			ct.Kill() // nothing of this session may reach a broker after the next one starts
		}
		go cl.Close() // only releases the client's resources; its connections are gone
	}
}

// session runs transactions until stop or until one ends the session.
func (tp *txnProducer) session(cl *kgo.Client, ct *testkit.ConnTracker, session int64) error {
	for seq := 0; !tp.stopped(); seq++ {
		txn := fmt.Sprintf("%s.s%d.t%d", tp.id, session, seq)
		if err := tp.transact(cl, ct, fmt.Sprintf("%s.s%d", tp.id, session), txn); err != nil {
			return err
		}
		time.Sleep(time.Duration(tp.rng.Int64N(int64(txnMaxPause))))
	}
	return nil
}

// txnEnding is how a transaction is to end, drawn before it starts.
type txnEnding int

const (
	endCommit txnEnding = iota
	endAbort
	endCrash
)

func (tp *txnProducer) drawEnding() txnEnding {
	switch n := tp.rng.IntN(100); {
	case n < txnCrashPercent:
		return endCrash
	case n < txnCrashPercent+txnAbortPercent:
		return endAbort
	default:
		return endCommit
	}
}

// transact runs one transaction; an error ends the session.
func (tp *txnProducer) transact(cl *kgo.Client, ct *testkit.ConnTracker, producer, txn string) error {
	ending, n := tp.drawEnding(), 1+tp.rng.IntN(txnMaxRecords)
	partitions := make([]int32, n)
	for i := range partitions {
		partitions[i] = int32(tp.rng.IntN(int(tp.partitions)))
	}
	if err := cl.BeginTransaction(); err != nil {
		tp.noteErr("begin %s: %v", txn, err)
		return errSessionOver
	}
	if !tp.produceAll(cl, producer, txn, partitions) {
		return tp.abort(cl, txn, "a record failed")
	}
	switch ending {
	case endCrash:
		tp.h.EndTxn(txn, history.TxnAborted) // never committed: the next session's InitProducerId aborts it
		tp.crashes.Add(1)
		tp.aborted.Add(1)
		ct.Kill()
		return errCrash
	case endAbort:
		return tp.abort(cl, txn, "")
	}
	return tp.commit(cl, txn)
}

// produceAll produces one record per listed partition in the open
// transaction and waits (bounded) for every outcome; it reports whether all
// were acknowledged.
func (tp *txnProducer) produceAll(cl *kgo.Client, producer, txn string, partitions []int32) bool {
	var failed atomic.Bool
	for i, p := range partitions {
		value := fmt.Sprintf("%s.r%02d", txn, i)
		tp.h.ProduceTxn(producer, txn, value, fmt.Sprintf("k%d", i), p)
		rec := &kgo.Record{Topic: tp.topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(value)}
		cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
			if err != nil {
				tp.h.Unknown(string(r.Value))
				failed.Store(true)
				return
			}
			tp.h.Ack(string(r.Value), r.Partition, r.Offset)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), txnStepTimeout)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		tp.noteErr("flush %s: %v", txn, err)
		return false
	}
	return !failed.Load()
}

// abort ends txn without a commit (buffered records dropped first).
func (tp *txnProducer) abort(cl *kgo.Client, txn, why string) error {
	tp.h.EndTxn(txn, history.TxnAborted)
	tp.aborted.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), txnStepTimeout)
	defer cancel()
	if err := cl.AbortBufferedRecords(ctx); err != nil {
		tp.noteErr("abort buffered records of %s (%s): %v", txn, why, err)
		return errSessionOver
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		tp.noteErr("abort %s (%s): %v", txn, why, err)
		return errSessionOver
	}
	return nil
}

// commit asks for txn's commit; an unconfirmed commit ends the session (the
// next InitProducerId settles it).
func (tp *txnProducer) commit(cl *kgo.Client, txn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnStepTimeout)
	defer cancel()
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		tp.h.EndTxn(txn, history.TxnUnknown)
		tp.unknown.Add(1)
		tp.noteErr("commit %s: %v", txn, err)
		return errSessionOver
	}
	tp.h.EndTxn(txn, history.TxnCommitted)
	tp.committed.Add(1)
	return nil
}

func (tp *txnProducer) noteErr(format string, args ...any) {
	tp.errs.Lock()
	defer tp.errs.Unlock()
	if len(tp.errs.first) < 5 {
		tp.errs.first = append(tp.errs.first, fmt.Sprintf(format, args...))
	}
}

func (tp *txnProducer) String() string {
	tp.errs.Lock()
	defer tp.errs.Unlock()
	return fmt.Sprintf("transactional producer %s: %d sessions, %d committed, %d aborted (%d crashes), %d unknown; first errors [%s]",
		tp.id, tp.sessions.Load(), tp.committed.Load(), tp.aborted.Load(), tp.crashes.Load(), tp.unknown.Load(),
		strings.Join(tp.errs.first, "; "))
}

// committedReader consumes a topic from its start with read_committed into
// H, as one session, for the whole soak.
type committedReader struct {
	stop    context.CancelFunc
	done    chan struct{}
	records atomic.Int64
}

func startCommittedReader(c *Cluster, h *history.History, topic string, partitions int32) *committedReader {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(300*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cr := &committedReader{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(cr.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				h.Observe("read-committed", r.Partition, r.Offset, string(r.Value))
				cr.records.Add(1)
			})
		}
	}()
	c.t.Cleanup(cr.finish)
	return cr
}

// finish stops the reader (idempotent).
func (cr *committedReader) finish() {
	cr.stop()
	<-cr.done
}

// readCommittedFinal reads every partition of topic from its log start to
// the HW with read_committed, into H's final reads. Control records are kept
// so that the read knows it reached the HW even when the last offsets are
// markers or aborted batches; an open transaction holds the LSO below the
// HW, so the read fails after timeout.
func readCommittedFinal(c *Cluster, h *history.History, topic string, partitions int32, timeout time.Duration) error {
	starts, ends, err := listBoundsRetrying(c, topic, partitions, catchUpTimeout)
	if err != nil {
		return err
	}
	offsets := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		offsets[p], next[p] = kgo.NewOffset().At(starts[p]), starts[p]
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(300*time.Millisecond))
	defer cl.Close()
	records := map[int32][]history.Record{}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !readDone(next, ends) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Offset < ends[r.Partition] && !r.Attrs.IsControl() {
				records[r.Partition] = append(records[r.Partition], history.Record{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	for p := int32(0); p < partitions; p++ {
		h.Final(p, starts[p], records[p])
	}
	if !readDone(next, ends) {
		return fmt.Errorf("read_committed read of %s incomplete after %v: at %v, want %v", topic, timeout, next, ends)
	}
	return nil
}

// listBoundsRetrying is listBounds retried while the cluster settles.
func listBoundsRetrying(c *Cluster, topic string, partitions int32, timeout time.Duration) (starts, ends map[int32]int64, err error) {
	adm := kadm.NewClient(c.Client())
	deadline := time.Now().Add(timeout)
	for {
		starts, ends, err = listBounds(adm, topic, partitions)
		if err == nil || time.Now().After(deadline) {
			return starts, ends, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
