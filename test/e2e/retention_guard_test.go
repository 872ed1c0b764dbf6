package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// TestRetentionGuard plays the weekend outage at small scale: a group
// stops while its tiered topic keeps 60 s. Its retention margin counts
// down in /metrics and a warning is logged. Without a hold, the group
// restarted with auto.offset.reset=latest skips what retention deleted,
// and the skip is logged and counted with its record count. With
// retention.hold.ms, the restarted group resumes at its committed offset
// and reads every record; the held objects go once the hold expires
// (never before retention.ms + retention.hold.ms), and `strata tier
// verify` stays clean.
//
// It takes about 90 s of wall time, which is retention's, not etcd's, so
// it runs in the embedded-etcd pass only.
func TestRetentionGuard(t *testing.T) {
	if os.Getenv("STRATA_TEST_ETCD") == "external" {
		t.Skip("retention timing only; covered by the embedded-etcd pass")
	}
	b := StartBroker(t, withArgs("--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms",
		"--consumer-lag-interval", "500ms", "--retention-warn-margin", "1h"))
	const lost, held = "guard-lost", "guard-held"
	const holdMs = 20_000
	for _, topic := range []string{lost, held} {
		configs := map[string]string{"retention.ms": "60000", "internal.segment.bytes": "16384"}
		if topic == held {
			configs["retention.hold.ms"] = strconv.Itoa(holdMs)
		}
		createTopic(t, b.Admin(), topic, 1, configs)
	}
	// 200 records of 4 KiB, one per batch: four to a segment, offset 50 in
	// a sealed one.
	cl := b.Client()
	var before50 time.Time // no earlier than the timestamp of record 50
	for i := range int64(200) {
		if i == 50 {
			before50 = time.Now()
		}
		for _, topic := range []string{lost, held} {
			if err := cl.ProduceSync(testCtx(t, 30*time.Second), &kgo.Record{Topic: topic, Value: tierValue(0, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitAt(t, b, "g-lost", lost, 50)
	commitAt(t, b, "g-held", held, 50)
	commitAt(t, b, "g-idle", held, 50)
	stop := trickle(t, b, lost, held)
	defer stop()

	// The margin counts down and is below the 1h warning margin at once.
	lostLabels := map[string]string{"group": "g-lost", "topic": lost, "partition": "0"}
	margin := func() float64 {
		var v float64
		testkit.WaitFor(t, 20*time.Second, "a retention margin for g-lost", func() bool {
			var ok bool
			v, ok = seriesValue(scrapeFamilies(t, b), "strata_consumergroup_retention_margin_seconds", lostLabels)
			return ok
		})
		return v
	}
	first := margin()
	time.Sleep(2 * time.Second)
	if second := margin(); first > 60 || second >= first {
		t.Fatalf("margin %v s then %v s: want it below 60 s and counting down", first, second)
	}
	if err := b.waitLogLine("will lose data to retention", 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// Retention passes offset 50 of the topic without a hold, not of the held one.
	testkit.WaitFor(t, 120*time.Second, "retention deletes offset 50 of "+lost, func() bool { return logStart(t, b, lost) > 50 })
	if s := logStart(t, b, held); s > 50 {
		t.Fatalf("%s log start %d after retention.ms with a hold: the held object is gone", held, s)
	}

	// g-lost restarts with latest: it jumps past the gap, and says so.
	resumeAtEnd(t, b, "g-lost", lost)
	if err := b.waitLogLine("skipped records that retention deleted", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`skipped records that retention deleted[^\n]*group=g-lost[^\n]*`).FindString(b.Log())
	records, start := logInt(t, line, "records"), logInt(t, line, "log_start")
	if records <= 0 || records != start-50 {
		t.Fatalf("skip logged %d records with log start %d: want log start - 50\n%s", records, start, line)
	}
	testkit.WaitFor(t, 10*time.Second, "the skip counted in /metrics", func() bool {
		v, ok := seriesValue(scrapeFamilies(t, b), "strata_consumergroup_skipped_records_total", lostLabels)
		return ok && int64(v) == records
	})

	// g-held restarts with latest too, and reads on from 50 with nothing missing.
	if got := resumeAndReadFrom(t, b, "g-held", held); got != 50 {
		t.Fatalf("g-held resumed at %d, want its committed 50", got)
	}

	// g-idle still holds offset 50 until retention.ms + retention.hold.ms.
	testkit.WaitFor(t, 120*time.Second, "the hold expires", func() bool { return logStart(t, b, held) > 50 })
	if elapsed := time.Since(before50); elapsed < 60*time.Second+holdMs*time.Millisecond {
		t.Fatalf("the held object went %v after it was written, before retention.ms + retention.hold.ms", elapsed)
	}
	out, code := tierVerify(t, b, filepath.Join(b.DataDir, "objects"))
	if code != 0 || !strings.Contains(out, "0 problems") {
		t.Fatalf("tier verify after held objects were deleted: exit %d\n%s", code, out)
	}
}

// commitAt has group consume topic's first records, leave, and commit
// offset (a group that crashed after its last commit).
func commitAt(t *testing.T, b *Broker, group, topic string, offset int64) {
	t.Helper()
	cl := b.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t, 30*time.Second)
	for seen := int64(0); seen < offset; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: read %d of %d records: %v", group, seen, offset, err)
		}
		seen += int64(fs.NumRecords())
	}
	cl.Close() // leaves the group, so an admin commit is accepted
	var o kadm.Offsets
	o.AddOffset(topic, 0, offset, -1)
	resp, err := b.Admin().CommitOffsets(ctx, group, o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("%s: commit %d: %v", group, offset, err)
	}
}

// trickle produces a record a second to each topic until stopped, so
// segments keep rolling and the produce rate is not zero.
func trickle(t *testing.T, b *Broker, topics ...string) (stop func()) {
	cl := b.Client()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 0; ctx.Err() == nil; seq++ {
			for _, topic := range topics {
				r := &kgo.Record{Topic: topic, Value: tierValue(0, int64(seq))}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil && ctx.Err() == nil {
					t.Errorf("trickle to %s: %v", topic, err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { cancel(); wg.Wait(); cl.Close() }
}

func logStart(t *testing.T, b *Broker, topic string) int64 {
	t.Helper()
	starts, err := b.Admin().ListStartOffsets(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	o, ok := starts.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("start offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// resumeAtEnd restarts group with auto.offset.reset=latest, reads one
// record and commits.
func resumeAtEnd(t *testing.T, b *Broker, group, topic string) {
	t.Helper()
	cl := b.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	defer cl.Close()
	ctx := testCtx(t, 30*time.Second)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: no record after the reset: %v", group, err)
		}
		if fs.NumRecords() > 0 {
			break
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("%s: commit: %v", group, err)
	}
}

// resumeAndReadFrom restarts group with auto.offset.reset=latest, checks
// that it reads every offset from where it starts up to the end it saw at
// start, and returns the offset it started at.
func resumeAndReadFrom(t *testing.T, b *Broker, group, topic string) int64 {
	t.Helper()
	ends, err := b.Admin().ListEndOffsets(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := b.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	defer cl.Close()
	ctx := testCtx(t, 60*time.Second)
	first, next := int64(-1), int64(-1)
	for next < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: read up to %d of %d: %v", group, next, end.Offset, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first, next = r.Offset, r.Offset
			}
			if r.Offset != next {
				t.Fatalf("%s: offset %d after %d: records missing", group, r.Offset, next-1)
			}
			next++
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("%s: commit: %v", group, err)
	}
	return first
}

// logInt is the integer value of key=N in a log line.
func logInt(t *testing.T, line, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", key, line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
