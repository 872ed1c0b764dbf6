package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestTxnChainsBesidePlainChains: on one broker with default flags, one
// chain of transactional ETL stages per member variant (cooperative-sticky,
// range and sticky balancers, static and dynamic members, the KIP-848
// consumer protocol) runs beside the same chains without transactions. Each
// stage is a group of members copying the previous stage's topic into its
// own; one member of every stage after another is replaced while records
// flow. A transactional member leaves as an application shutting down
// mid-transaction does: it commits what it has, begins again, produces what
// its next poll brought and aborts. With transaction version 2 that abort
// follows the commit within milliseconds, carrying the epoch the commit
// returned, often while the commit's markers are still being written: the
// broker must let the client retry it (CONCURRENT_TRANSACTIONS), as it does
// a commit or a produce in that window, not fail the producer. The plain
// chains' load (their acks=all appends and offset commits share the
// broker's fsyncs) stretches that window.
//
// Nothing a correct client never sees may reach a member: INVALID_TXN_STATE
// or any other error from a produce, End, Begin or offset commit fails the
// test; aborts that GroupTransactSession does itself after a rebalance are
// allowed. Every value fed into a transactional chain must be in each of
// its stages' read_committed output exactly once (at least once for the
// plain chains).
//
// Sized by STRATA_TXN_CHAIN_RECORDS (default 50,000 per chain; 10,000 with
// -short), STRATA_TXN_CHAIN_STAGES (2), STRATA_TXN_CHAIN_MEMBERS (2 per
// stage), STRATA_TXN_CHAIN_PARTITIONS (6), STRATA_TXN_CHAIN_TXN_RECORDS
// (200 records per transaction), STRATA_TXN_CHAIN_VALUE_BYTES (100),
// STRATA_TXN_CHAIN_FEED_SECONDS (how long each source is fed for; 30 per
// 50,000 records) and
// STRATA_TXN_CHAIN_REPLACE_AT (0.25,0.5,0.75: the fractions of the records
// a stage has committed when a member is replaced);
// STRATA_TXN_CHAIN_VARIANTS picks variants (comma-separated names),
// STRATA_TXN_CHAIN_PLAIN=0 leaves out the plain chains,
// STRATA_TXN_CHAIN_BROKER_ARGS adds broker flags, STRATA_TXN_CHAIN_TIMEOUT
// bounds the wait for delivery, and STRATA_TXN_CHAIN_LOG_DIR keeps the
// broker log of a failed run (of every run with
// STRATA_TXN_CHAIN_KEEP_LOG=always).
func TestTxnChainsBesidePlainChains(t *testing.T) {
	cfg := chainConfigFromEnv(t)
	b := StartBroker(t, withArgs(cfg.BrokerArgs...))
	keepBrokerLogOnFailure(t, b, cfg.LogDir)
	problems := &chainProblems{}

	var chains []*chain
	for _, v := range cfg.Variants {
		chains = append(chains, newChain(t, b, v, true, cfg, problems))
	}
	if cfg.Plain {
		for _, v := range cfg.Variants {
			chains = append(chains, newChain(t, b, v, false, cfg, problems))
		}
	}
	var topics []string
	for _, c := range chains {
		topics = append(topics, c.topics...)
	}
	createTopics(t, b.Admin(), cfg.Partitions, topics)
	t.Logf("%d chains of %d stages × %d members, %d records each, %d per transaction, %d partitions per topic",
		len(chains), cfg.Stages, cfg.Members, cfg.Records, cfg.TxnRecords, cfg.Partitions)

	begin := time.Now()
	problems.start = begin
	for _, c := range chains {
		c.start(begin)
	}
	// Stop the members however the test ends, so their transactions end
	// before the broker is killed (cleanups run last in, first out).
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range chains {
			c.stop()
		}
	}
	t.Cleanup(stopAll)

	deadline := time.Now().Add(cfg.Timeout)
	lastLog := time.Now()
	for {
		pending := 0
		for _, c := range chains {
			if c.doneIn == 0 && c.final.distinct() >= cfg.Records {
				c.doneIn = time.Since(begin)
			}
			if c.doneIn == 0 {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, c := range chains {
				t.Log(c.progress())
			}
			problems.report(t)
			t.Fatalf("%d chains did not deliver all %d values within %v", pending, cfg.Records, cfg.Timeout)
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			for _, c := range chains {
				t.Logf("+%.0fs %s", time.Since(begin).Seconds(), c.progress())
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopAll()
	for _, c := range chains {
		t.Logf("%s; fed in %.1fs, delivered in %.1fs", c.progress(), c.fedIn.Seconds(), c.doneIn.Seconds())
	}
	problems.report(t)
	for _, c := range chains {
		c.checkOutput(t)
	}
	t.Logf("all chains delivered in %.1fs", time.Since(begin).Seconds())
}

// createTopics creates the topics in one request.
func createTopics(t *testing.T, adm *kadm.Client, partitions int32, topics []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}
}

// keepBrokerLogOnFailure copies the broker's whole log into dir when t
// fails, or always with STRATA_TXN_CHAIN_KEEP_LOG=always (the harness
// prints only its tail, and drops it with the temp dir).
func keepBrokerLogOnFailure(t *testing.T, b *Broker, dir string) {
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("STRATA_TXN_CHAIN_KEEP_LOG") != "always" {
			return
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.log", sanitize(t.Name()), time.Now().Format("20060102-150405.000")))
		if err := os.WriteFile(path, []byte(b.Log()), 0o644); err != nil {
			t.Logf("keeping the broker log: %v", err)
			return
		}
		t.Logf("broker log kept in %s", path)
	})
}
