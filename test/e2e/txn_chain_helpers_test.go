package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers of the ETL chain test (txn_chain_test.go): a chain is a source
// topic fed with numbered values and a row of stages, each a consumer group
// of franz-go members copying the previous topic into its own. A
// transactional chain's members are kgo.GroupTransactSessions (read
// committed, a transaction ended and begun again every few hundred
// records); a plain chain's members produce idempotently and commit their
// offsets after each flush (at least once).

// chainVariant is how the members of every stage of a chain join their
// group: the balancer, static or dynamic membership, classic or KIP-848.
type chainVariant struct {
	Name             string
	Balancer         func() kgo.GroupBalancer
	Static           bool // members carry an instance id (KIP-345)
	ConsumerProtocol bool // KIP-848: the broker assigns (kgo.ServerSideBalancer)
}

// chainVariants are the member kinds the test runs: every balancer kgo
// offers, static and dynamic members, and the consumer protocol (kgo speaks
// it only with the range or sticky balancer; sticky asks for "uniform").
var chainVariants = []chainVariant{
	{Name: "coopsticky", Balancer: func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() }},
	{Name: "range-static", Balancer: func() kgo.GroupBalancer { return kgo.RangeBalancer() }, Static: true},
	{Name: "sticky-static", Balancer: func() kgo.GroupBalancer { return kgo.StickyBalancer() }, Static: true},
	{Name: "consumer848", Balancer: func() kgo.GroupBalancer { return kgo.StickyBalancer() }, ConsumerProtocol: true},
	{Name: "coopsticky-static", Balancer: func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() }, Static: true},
	{Name: "range", Balancer: func() kgo.GroupBalancer { return kgo.RangeBalancer() }},
	{Name: "sticky", Balancer: func() kgo.GroupBalancer { return kgo.StickyBalancer() }},
	{Name: "consumer848-static", Balancer: func() kgo.GroupBalancer { return kgo.RangeBalancer() }, ConsumerProtocol: true, Static: true},
}

// chainConfig sizes a run; every field can be set from the environment
// (chainConfigFromEnv) so the same test runs at 500,000 records.
type chainConfig struct {
	Records    int           // values fed into each chain's source topic
	Stages     int           // stages per chain
	Members    int           // members per stage
	Partitions int32         // partitions of every topic
	TxnRecords int           // records per transaction: End and Begin again after this many
	ValueBytes int           // size of each record's value
	ReplaceAt  []float64     // fractions of Records a stage has committed when one of its members is replaced
	Plain      bool          // also run a non-transactional chain per variant
	FeedFor    time.Duration // each feeder spreads its records evenly over this time, so all chains flow at once
	Variants   []chainVariant
	Timeout    time.Duration // for the chains to deliver every value
	BrokerArgs []string
	LogDir     string // where to keep the broker log of a failed run
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func chainConfigFromEnv(t *testing.T) chainConfig {
	t.Helper()
	records := 50_000
	if testing.Short() {
		records = 10_000
	}
	cfg := chainConfig{
		Records:    envInt(t, "STRATA_TXN_CHAIN_RECORDS", records),
		Stages:     envInt(t, "STRATA_TXN_CHAIN_STAGES", 2),
		Members:    envInt(t, "STRATA_TXN_CHAIN_MEMBERS", 2),
		Partitions: int32(envInt(t, "STRATA_TXN_CHAIN_PARTITIONS", 6)),
		TxnRecords: envInt(t, "STRATA_TXN_CHAIN_TXN_RECORDS", 200),
		ValueBytes: envInt(t, "STRATA_TXN_CHAIN_VALUE_BYTES", 100),
		ReplaceAt:  []float64{0.25, 0.5, 0.75},
		Plain:      os.Getenv("STRATA_TXN_CHAIN_PLAIN") != "0",
		BrokerArgs: strings.Fields(os.Getenv("STRATA_TXN_CHAIN_BROKER_ARGS")),
		LogDir:     os.Getenv("STRATA_TXN_CHAIN_LOG_DIR"),
	}
	// Fed at 50,000 records per 30 s per chain by default: every chain
	// flows for the whole run, whatever its size.
	feedSeconds := max(1, cfg.Records*30/50_000)
	cfg.FeedFor = time.Duration(envInt(t, "STRATA_TXN_CHAIN_FEED_SECONDS", feedSeconds)) * time.Second
	// Generous: a healthy run ends within seconds of the feed; a chain
	// stalled by a transaction left open must still end the test.
	cfg.Timeout = cfg.FeedFor + 3*time.Minute
	if s := os.Getenv("STRATA_TXN_CHAIN_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("STRATA_TXN_CHAIN_TIMEOUT=%q: %v", s, err)
		}
		cfg.Timeout = d
	}
	if s := os.Getenv("STRATA_TXN_CHAIN_REPLACE_AT"); s != "" {
		cfg.ReplaceAt = nil
		for _, f := range strings.Split(s, ",") {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil || x <= 0 || x >= 1 {
				t.Fatalf("STRATA_TXN_CHAIN_REPLACE_AT=%q: want fractions in (0, 1)", s)
			}
			cfg.ReplaceAt = append(cfg.ReplaceAt, x)
		}
	}
	cfg.Variants = chainVariants
	if s := os.Getenv("STRATA_TXN_CHAIN_VARIANTS"); s != "" {
		cfg.Variants = nil
		for _, name := range strings.Split(s, ",") {
			found := false
			for _, v := range chainVariants {
				if v.Name == name {
					cfg.Variants, found = append(cfg.Variants, v), true
				}
			}
			if !found {
				t.Fatalf("STRATA_TXN_CHAIN_VARIANTS: unknown variant %q", name)
			}
		}
	}
	return cfg
}

// chainProblems collects, across all chains, the errors a correct client
// talking to a correct broker never sees (each one fails the test) and the
// tail of the clients' own warnings, for the failure report.
type chainProblems struct {
	mu       sync.Mutex
	start    time.Time
	errs     []string
	nErrs    int
	warnings []string // ring of the last kgo warnings and errors
	nWarn    int
}

const chainWarningsKept = 300

func (p *chainProblems) add(who, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nErrs++
	if len(p.errs) < 40 {
		p.errs = append(p.errs, fmt.Sprintf("+%.1fs %s: %s", time.Since(p.start).Seconds(), who, fmt.Sprintf(format, args...)))
	}
}

func (p *chainProblems) warn(who string, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line = fmt.Sprintf("+%.3fs %s: %s", time.Since(p.start).Seconds(), who, line)
	if len(p.warnings) < chainWarningsKept {
		p.warnings = append(p.warnings, line)
	} else {
		p.warnings[p.nWarn%chainWarningsKept] = line
	}
	p.nWarn++
}

func (p *chainProblems) report(t *testing.T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errs {
		t.Errorf("unexpected client error: %s", e)
	}
	if p.nErrs > len(p.errs) {
		t.Errorf("... %d unexpected client errors in all", p.nErrs)
	}
	if t.Failed() && p.nWarn > 0 {
		n := min(p.nWarn, chainWarningsKept)
		lines := make([]string, 0, n)
		for i := p.nWarn - n; i < p.nWarn; i++ {
			lines = append(lines, p.warnings[i%chainWarningsKept])
		}
		t.Logf("last %d of %d kgo warnings:\n%s", n, p.nWarn, strings.Join(lines, "\n"))
	}
}

// chainLogger hands a member's kgo warnings and errors to the problems.
type chainLogger struct {
	who string
	p   *chainProblems
}

func (l chainLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l chainLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", level, msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fmt.Fprintf(&b, " %v=%v", keyvals[i], keyvals[i+1])
	}
	l.p.warn(l.who, b.String())
}

// chain is one source topic and its stages.
type chain struct {
	t             *testing.T
	b             *Broker
	name          string
	variant       chainVariant
	transactional bool
	cfg           chainConfig
	problems      *chainProblems
	topics        []string // topics[0] is the source, topics[i] stage i's output
	stages        []*chainStage
	final         *distinctReader
	fedIn         time.Duration // until the feeder had every value acknowledged
	doneIn        time.Duration // until the final topic held every value
}

func newChain(t *testing.T, b *Broker, v chainVariant, transactional bool, cfg chainConfig, problems *chainProblems) *chain {
	kind := "plain"
	if transactional {
		kind = "txn"
	}
	c := &chain{t: t, b: b, name: kind + "-" + v.Name, variant: v, transactional: transactional, cfg: cfg,
		problems: problems}
	c.topics = append(c.topics, c.name+"-source")
	for i := 1; i <= cfg.Stages; i++ {
		c.topics = append(c.topics, fmt.Sprintf("%s-stage%d", c.name, i))
	}
	for i := 1; i <= cfg.Stages; i++ {
		s := &chainStage{c: c, index: i, in: c.topics[i-1], out: c.topics[i], group: c.topics[i]}
		for m := 0; m < cfg.Members; m++ {
			s.slots = append(s.slots, &memberSlot{stage: s, index: m})
		}
		c.stages = append(c.stages, s)
	}
	return c
}

// value is the i-th value fed into the chain; every stage copies it as is.
// ValueBytes pads it (after a '|') to a realistic record size.
func (c *chain) value(i int) string {
	v := fmt.Sprintf("%s/%08d", c.name, i)
	if pad := c.cfg.ValueBytes - len(v) - 1; pad > 0 {
		v += "|" + strings.Repeat("x", pad)
	}
	return v
}

// start runs the stages' members, a reader of the last topic and then the
// feeder.
func (c *chain) start(begin time.Time) {
	for _, s := range c.stages {
		for _, slot := range s.slots {
			slot.startRun()
		}
		go s.replaceMembersMidway()
	}
	c.final = startDistinctReader(c.t, c.b, c.topics[len(c.topics)-1])
	go c.feed(begin)
}

// feed produces every value to the source topic (idempotent, acks=all,
// keyed by the value so that each transaction downstream spans partitions).
func (c *chain) feed(begin time.Time) {
	who := c.name + "/feeder"
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.b.Addr), kgo.ClientID(who), kgo.DefaultProduceTopic(c.topics[0]),
		kgo.WithLogger(chainLogger{who, c.problems}))
	if err != nil {
		c.problems.add(who, "new client: %v", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	var failed atomic.Int64
	for i := 0; i < c.cfg.Records; i++ {
		if due := begin.Add(c.cfg.FeedFor * time.Duration(i) / time.Duration(c.cfg.Records)); time.Until(due) > 5*time.Millisecond {
			time.Sleep(time.Until(due))
		}
		v := []byte(c.value(i))
		cl.Produce(ctx, &kgo.Record{Key: v, Value: v}, func(r *kgo.Record, err error) {
			if err != nil && failed.Add(1) <= 3 {
				c.problems.add(who, "produce %s: %v", r.Value, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		c.problems.add(who, "flush: %v", err)
	}
	c.fedIn = time.Since(begin)
}

// stop ends every member's current transaction and closes them all.
func (c *chain) stop() {
	var wg sync.WaitGroup
	for _, s := range c.stages {
		s.stopped.Store(true)
		for _, slot := range s.slots {
			wg.Add(1)
			go func() { defer wg.Done(); slot.stopRun() }()
		}
	}
	wg.Wait()
	c.final.stop()
}

func (c *chain) progress() string {
	var parts []string
	for _, s := range c.stages {
		parts = append(parts, fmt.Sprintf("stage%d %d committed in %d commits (%d aborted, %d replacements)",
			s.index, s.committed.Load(), s.commits.Load(), s.aborts.Load(), s.replacements.Load()))
	}
	return fmt.Sprintf("%s: final topic %d of %d values; %s", c.name, c.final.distinct(), c.cfg.Records, strings.Join(parts, "; "))
}

// checkOutput reads every stage's output topic to its high watermark with
// read_committed and checks that each fed value is there exactly once
// (transactional chains) or at least once (plain chains), and nothing else.
func (c *chain) checkOutput(t *testing.T) {
	t.Helper()
	for _, topic := range c.topics[1:] {
		read := readIsolated(t, c.b, topic, true, 2*time.Minute)
		counts := make([]int32, c.cfg.Records)
		var foreign []string
		total := 0
		for _, recs := range read.Records {
			for _, r := range recs {
				total++
				v := string(r.Value)
				num, ok := strings.CutPrefix(v, c.name+"/")
				num, _, _ = strings.Cut(num, "|")
				i, err := strconv.Atoi(num)
				if !ok || err != nil || i < 0 || i >= c.cfg.Records || v != c.value(i) {
					foreign = append(foreign, v)
					continue
				}
				counts[i]++
			}
		}
		var missing, dups []string
		for i, n := range counts {
			switch {
			case n == 0:
				missing = append(missing, c.value(i))
			case n > 1:
				dups = append(dups, fmt.Sprintf("%s×%d", c.value(i), n))
			}
		}
		t.Logf("%s: %d records read_committed, %d values missing, %d duplicated, %d foreign",
			topic, total, len(missing), len(dups), len(foreign))
		if len(missing) > 0 {
			t.Errorf("%s: %d of %d values missing: %s", topic, len(missing), c.cfg.Records, firstFew(missing))
		}
		if len(foreign) > 0 {
			t.Errorf("%s: %d records that were never fed: %s", topic, len(foreign), firstFew(foreign))
		}
		if c.transactional && len(dups) > 0 {
			t.Errorf("%s: exactly once violated, %d values more than once: %s", topic, len(dups), firstFew(dups))
		}
	}
}

// chainStage is one consumer group copying topic in to topic out.
type chainStage struct {
	c            *chain
	index        int // 1-based
	in, out      string
	group        string
	slots        []*memberSlot
	stopped      atomic.Bool
	committed    atomic.Int64 // records consumed in committed transactions (plain: committed offsets)
	commits      atomic.Int64
	aborts       atomic.Int64 // transactions GroupTransactSession aborted itself (a rebalance) or after a produce error
	replacements atomic.Int64
}

// replaceMembersMidway replaces a member (each in turn) whenever the stage
// has committed the next of the ReplaceAt fractions of the records, so
// members leave and join while records flow through every stage.
func (s *chainStage) replaceMembersMidway() {
	for i, at := range s.c.cfg.ReplaceAt {
		target := int64(float64(s.c.cfg.Records) * at)
		for s.committed.Load() < target {
			if s.stopped.Load() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		s.slots[i%len(s.slots)].replace()
		s.replacements.Add(1)
	}
}

// memberSlot is one member's place in a stage. Replacing it starts a new
// member with a new transactional id; a static member keeps its instance
// id, as a restarted process does.
type memberSlot struct {
	stage *chainStage
	index int
	mu    sync.Mutex
	gen   int
	run   *memberRun
}

func (m *memberSlot) newRun() *memberRun {
	s := m.stage
	instanceID := fmt.Sprintf("%s-stage%d-member%d", s.c.name, s.index, m.index)
	// A static member's successor is the same instance restarted: it
	// keeps the transactional id (and fences what its predecessor may
	// have left). A dynamic successor runs beside its predecessor for a
	// moment, so it needs an id of its own.
	txnID := instanceID
	if !s.c.variant.Static {
		txnID = fmt.Sprintf("%s-gen%d", instanceID, m.gen)
	}
	r := &memberRun{
		slot:       m,
		who:        fmt.Sprintf("%s/stage%d/member%d.%d", s.c.name, s.index, m.index, m.gen),
		txnID:      txnID,
		instanceID: instanceID,
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	go r.run()
	return r
}

func (m *memberSlot) startRun() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.run = m.newRun()
}

func (m *memberSlot) stopRun() {
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	r.stop()
}

// replace: a dynamic member's successor joins first and the member leaves
// a moment later (two rebalances with records flowing); a static member
// stops and its successor rejoins with the same instance id.
func (m *memberSlot) replace() {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.run
	old.abortOnLeave.Store(true)
	m.gen++
	if m.stage.c.variant.Static {
		old.stop()
		m.run = m.newRun()
		return
	}
	m.run = m.newRun()
	time.Sleep(2 * time.Second)
	old.stop()
}

// memberRun is one member, from its start to its graceful stop. A run whose
// client failed (an error no correct client sees, already counted as a
// problem) starts a fresh client with the same transactional id, which
// fences the failed one and aborts what it left open, so that the chain
// still delivers and the output can still be checked.
type memberRun struct {
	slot       *memberSlot
	who        string
	txnID      string
	instanceID string
	stopOnce   sync.Once
	stopCh     chan struct{}
	done       chan struct{}
	// abortOnLeave: a transactional member being replaced leaves by
	// aborting a last transaction (runTransactional).
	abortOnLeave atomic.Bool
}

func (r *memberRun) stop() {
	r.stopOnce.Do(func() { close(r.stopCh) })
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		r.slot.stage.c.problems.add(r.who, "did not stop within 90s")
	}
}

func (r *memberRun) stopping() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

func (r *memberRun) run() {
	defer close(r.done)
	for restart := 0; !r.stopping(); restart++ {
		var err error
		if r.slot.stage.c.transactional {
			err = r.runTransactional()
		} else {
			err = r.runPlain()
		}
		if err == nil {
			return
		}
		if !r.stopping() {
			err = fmt.Errorf("%w (client restarted)", err)
		}
		r.slot.stage.c.problems.add(r.who, "%v", err)
		select {
		case <-r.stopCh:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// clientOpts are the options every member shares.
func (r *memberRun) clientOpts() []kgo.Opt {
	s := r.slot.stage
	v := s.c.variant
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.c.b.Addr),
		kgo.ClientID(r.who),
		kgo.WithLogger(chainLogger{r.who, s.c.problems}),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(time.Second),
		kgo.SessionTimeout(20 * time.Second),
		kgo.Balancers(v.Balancer()),
		kgo.DefaultProduceTopic(s.out),
	}
	if v.Static {
		opts = append(opts, kgo.InstanceID(r.instanceID))
	}
	if v.ConsumerProtocol {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	return opts
}

// firstErr keeps the first error of a transaction's produce promises.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstErr) take() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// runTransactional is the ETL loop of a GroupTransactSession: poll, copy
// each record into the open transaction, and every TxnRecords records (or
// when the input is idle) End — which commits the offsets in the
// transaction, or aborts when the group rebalanced meanwhile — and Begin
// again. It returns nil after a graceful stop, else why the client is
// unusable.
func (r *memberRun) runTransactional() error {
	s := r.slot.stage
	opts := append(r.clientOpts(),
		kgo.TransactionalID(r.txnID),
		kgo.TransactionTimeout(2*time.Minute),
		kgo.RequireStableFetchOffsets(),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	defer sess.Close()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var produceErr firstErr
	pending := 0
	// copyPoll polls once and copies what it got into the open transaction.
	copyPoll := func(wait time.Duration) (int, error) {
		pollCtx, pollCancel := context.WithTimeout(runCtx, wait)
		fetches := sess.PollRecords(pollCtx, max(s.c.cfg.TxnRecords-pending, 1))
		pollCancel()
		if fetches.IsClientClosed() {
			return 0, errors.New("client closed under the member")
		}
		r.noteFetchErrors(fetches)
		recs := fetches.Records()
		for _, in := range recs {
			sess.Produce(runCtx, &kgo.Record{Key: in.Key, Value: in.Value}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					produceErr.set(err)
				}
			})
		}
		pending += len(recs)
		return len(recs), nil
	}
	// copySomething polls until it copied at least one record (bounded).
	copySomething := func() error {
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			if n, err := copyPoll(500 * time.Millisecond); err != nil || n > 0 {
				return err
			}
		}
		return nil
	}
	end := func(try kgo.TransactionEndTry, again bool) error {
		ctx, cancel := context.WithTimeout(runCtx, 90*time.Second)
		defer cancel()
		perr := produceErr.take()
		if perr != nil {
			s.c.problems.add(r.who, "produce in a transaction: %v", perr)
			try = kgo.TryAbort
		}
		committed, err := sess.End(ctx, try)
		if err != nil {
			return fmt.Errorf("end transaction of %d records (commit %v): %w", pending, bool(try), err)
		}
		if committed {
			s.committed.Add(int64(pending))
			s.commits.Add(1)
		} else {
			s.aborts.Add(1)
		}
		pending = 0
		if !again {
			return nil
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		return nil
	}
	for {
		if r.stopping() {
			if !r.abortOnLeave.Load() {
				return end(kgo.TryCommit, false)
			}
			// Leave as a process shutting down mid-transaction does:
			// commit what is in hand, begin the next transaction, copy
			// the next poll into it and abort it (its records are the
			// next owner's to copy). The abort follows the commit within
			// milliseconds, as an application's shutdown path does;
			// under transaction version 2 it carries the epoch the
			// commit returned.
			if pending == 0 {
				if err := copySomething(); err != nil {
					return err
				}
			}
			if err := end(kgo.TryCommit, true); err != nil {
				return err
			}
			if err := copySomething(); err != nil {
				return err
			}
			if err := end(kgo.TryAbort, false); err != nil {
				return fmt.Errorf("leaving: %w", err)
			}
			return nil
		}
		n, err := copyPoll(500 * time.Millisecond)
		if err != nil {
			return err
		}
		if pending >= s.c.cfg.TxnRecords || (n == 0 && pending > 0) {
			if err := end(kgo.TryCommit, true); err != nil {
				return err
			}
		}
	}
}

// runPlain is the same loop without transactions: produce, flush, commit
// the consumed offsets (rebalances are held off while a poll's records are
// in hand), at least once.
func (r *memberRun) runPlain() error {
	s := r.slot.stage
	cl, err := kgo.NewClient(append(r.clientOpts(), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())...)
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	defer cl.CloseAllowingRebalance()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for !r.stopping() {
		pollCtx, pollCancel := context.WithTimeout(runCtx, 500*time.Millisecond)
		fetches := cl.PollRecords(pollCtx, s.c.cfg.TxnRecords)
		pollCancel()
		if fetches.IsClientClosed() {
			return errors.New("client closed under the member")
		}
		r.noteFetchErrors(fetches)
		recs := fetches.Records()
		if len(recs) == 0 {
			cl.AllowRebalance()
			continue
		}
		var produceErr firstErr
		for _, in := range recs {
			cl.Produce(runCtx, &kgo.Record{Key: in.Key, Value: in.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.set(err)
				}
			})
		}
		ctx, cancel := context.WithTimeout(runCtx, 90*time.Second)
		err := cl.Flush(ctx)
		if err == nil {
			err = produceErr.take()
		}
		if err != nil {
			cancel()
			return fmt.Errorf("flush: %w", err) // a fresh client resumes from the committed offsets
		}
		err = cl.CommitUncommittedOffsets(ctx)
		cancel()
		switch {
		case err == nil:
			s.committed.Add(int64(len(recs)))
			s.commits.Add(1)
		case isRebalanceCommitErr(err):
			s.aborts.Add(1) // the records are consumed again by their next owner
		default:
			s.c.problems.add(r.who, "commit offsets: %v", err)
		}
		cl.AllowRebalance()
	}
	return nil
}

// isRebalanceCommitErr: an offset commit a group rebalance overtook, which
// a correct client may see and which only means the records are read again.
func isRebalanceCommitErr(err error) bool {
	for _, e := range []error{kerr.RebalanceInProgress, kerr.IllegalGeneration, kerr.UnknownMemberID,
		kerr.StaleMemberEpoch, kerr.FencedMemberEpoch, kerr.FencedInstanceID} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// noteFetchErrors: poll timeouts are expected; any other fetch error is
// kept with the client warnings (not failed on its own: the outcome shows
// in the commits and the output).
func (r *memberRun) noteFetchErrors(fetches kgo.Fetches) {
	fetches.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		r.slot.stage.c.problems.warn(r.who, fmt.Sprintf("fetch %s-%d: %v", topic, p, err))
	})
}

// distinctReader reads a topic with read_committed from its start outside
// any group, counting how often it saw each value, so the test knows when
// a chain has delivered everything.
type distinctReader struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   map[string]int
}

func startDistinctReader(t *testing.T, b *Broker, topic string) *distinctReader {
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	d := &distinctReader{cancel: cancel, done: make(chan struct{}), seen: map[string]int{}}
	go func() {
		defer close(d.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				d.mu.Lock()
				d.seen[string(r.Value)]++
				d.mu.Unlock()
			})
		}
	}()
	t.Cleanup(d.stop)
	return d
}

func (d *distinctReader) stop() {
	d.cancel()
	<-d.done
}

func (d *distinctReader) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}
