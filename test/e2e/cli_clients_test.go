package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// strata produce and consume against a real broker, flag by flag, with
// the results checked through franz-go rather than through the CLI alone.

// cliResult is one finished strata run.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs strata with stdin and returns its output and exit code,
// failing t only if the binary could not run or overran 30 s.
func runCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return cliResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// lines splits output into lines without the final newline.
func lines(out string) []string {
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// produceValues writes values v0..v(n-1) with keys k0.. to one partition,
// stamped base, base+1s, ...
func produceValues(t *testing.T, cl *kgo.Client, topic string, partition int32, n int, base time.Time) {
	t.Helper()
	var records []*kgo.Record
	for i := range n {
		records = append(records, &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := cl.ProduceSync(testCtx(t, 10*time.Second), records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func values(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("v%d", i))
	}
	return out
}

// consumedJSON is a line of consume --format json.
type consumedJSON struct {
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Key       string       `json:"key"`
	Value     string       `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonHeader struct{ Key, Value string }

func TestCLIProduceFlags(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, "p3", 3, nil)

	// --partition, --header and --key-separator, read back with consume
	// --partition 1 --format json.
	runStrataInput(t, "k1:v1\nk2:v2\nk3:v3\n", "produce", "--brokers", b.Addr, "--topic", "p3", "--partition", "1",
		"--key-separator", ":", "--header", "a=1", "--header", "b=x=y", "--compression", "zstd", "--acks", "all")
	ends, err := adm.ListEndOffsets(testCtx(t, 10*time.Second), "p3")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 0, 1: 3, 2: 0} {
		if o, _ := ends.Lookup("p3", p); o.Offset != want {
			t.Errorf("partition %d ends at %d, want %d (all records to --partition 1)", p, o.Offset, want)
		}
	}
	out := runStrata(t, "consume", "--brokers", b.Addr, "--topic", "p3", "--partition", "1", "--offset", "start", "--exit-at-end", "--format", "json")
	var got []consumedJSON
	for _, line := range lines(out) {
		var r consumedJSON
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("consume --format json line %q: %v", line, err)
		}
		got = append(got, r)
	}
	if len(got) != 3 {
		t.Fatalf("consume --partition 1 --exit-at-end printed %d records, want 3:\n%s", len(got), out)
	}
	for i, r := range got {
		want := fmt.Sprintf("k%d/v%d", i+1, i+1)
		if r.Partition != 1 || r.Offset != int64(i) || r.Key+"/"+r.Value != want ||
			!slices.Equal(r.Headers, []jsonHeader{{"a", "1"}, {"b", "x=y"}}) {
			t.Errorf("record %d: %+v, want partition 1 offset %d %s with headers a=1 b=x=y", i, r, i, want)
		}
	}

	// Every codec and acks level reaches partition 0; acks=0 is not
	// acknowledged, so wait for the HW rather than trust the exit.
	for i, c := range [][2]string{{"none", "1"}, {"gzip", "all"}, {"snappy", "1"}, {"lz4", "all"}, {"zstd", "0"}} {
		runStrataInput(t, fmt.Sprintf("v%d\n", i), "produce", "--brokers", b.Addr, "--topic", "p3", "--partition", "0",
			"--compression", c[0], "--acks", c[1])
	}
	waitEndOffset(t, adm, "p3", 0, 5)
	out = runStrata(t, "consume", "--brokers", b.Addr, "--topic", "p3", "--partition", "0,2", "--from-beginning", "--exit-at-end")
	if !slices.Equal(lines(out), values(0, 5)) {
		t.Errorf("consume --partition 0,2 after one record per codec printed %q, want %q", lines(out), values(0, 5))
	}
	// All partitions, two of them empty or short: ends with exactly the 8.
	if out := runStrata(t, "consume", "--brokers", b.Addr, "--topic", "p3", "--offset", "start", "--exit-at-end"); len(lines(out)) != 8 {
		t.Errorf("consume --exit-at-end of the whole topic printed %d records, want 8:\n%s", len(lines(out)), out)
	}

	if r := runCLI(t, "x\n", "produce", "--brokers", b.Addr, "--topic", "p3", "--partition", "7"); r.code != 1 || !strings.Contains(r.stderr, "no partition 7") {
		t.Errorf("produce --partition 7 of 3: exit %d, %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--acks", "2"}, `--acks "2"`},
		{[]string{"produce", "--compression", "brotli"}, `--compression "brotli"`},
		{[]string{"produce", "--header", "novalue"}, `--header "novalue"`},
		{[]string{"produce", "--partition", "-3"}, "--partition -3"},
		{[]string{"consume", "--offset", "soon"}, `--offset "soon"`},
		{[]string{"consume", "--from-timestamp", "yesterday"}, `--from-timestamp "yesterday"`},
		{[]string{"consume", "--format", "%x"}, "unknown %x"},
		{[]string{"consume", "--partition", "one"}, `--partition "one"`},
		{[]string{"consume", "--group", "g", "--exit-at-end"}, "--exit-at-end"},
	} {
		args := append(c.args, "--brokers", b.Addr, "--topic", "p3")
		if r := runCLI(t, "", args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("strata %v: exit %d, stderr %q; want exit 2 naming %q", args, r.code, r.stderr, c.want)
		}
	}
}

// waitEndOffset waits for partition p of topic to end at want.
func waitEndOffset(t *testing.T, adm *kadm.Client, topic string, p int32, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(testCtx(t, 5*time.Second), topic)
		o, _ := ends.Lookup(topic, p)
		if err == nil && o.Offset == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s[%d] ends at %d (%v), want %d", topic, p, o.Offset, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A record the topic's max.message.bytes admits is produced although it is
// over kgo's default batch bound; one over the topic's limit fails, naming
// MESSAGE_TOO_LARGE and the limit.
func TestCLIProduceMaxMessageBytes(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, "big", 1, nil)
	createTopic(t, adm, "bigger", 1, map[string]string{"max.message.bytes": "2000000"})
	produce := func(topic string, size int) cliResult {
		return runCLI(t, strings.Repeat("x", size)+"\n", "produce", "--brokers", b.Addr, "--topic", topic)
	}
	if r := produce("big", 1_048_000); r.code != 0 {
		t.Fatalf("1,048,000 bytes under the default max.message.bytes 1,048,588: exit %d\n%s", r.code, r.stderr)
	}
	r := produce("big", 1_048_600)
	if r.code != 1 || !strings.Contains(r.stderr, "MESSAGE_TOO_LARGE") || !strings.Contains(r.stderr, "max.message.bytes of 1048588") {
		t.Errorf("1,048,600 bytes over max.message.bytes: exit %d, stderr:\n%s\nwant exit 1 naming MESSAGE_TOO_LARGE and the limit", r.code, r.stderr)
	}
	if r := produce("bigger", 1_500_000); r.code != 0 {
		t.Errorf("1,500,000 bytes under the topic's max.message.bytes 2,000,000: exit %d\n%s", r.code, r.stderr)
	}
	for topic, want := range map[string]string{"big": "1048000", "bigger": "1500000"} {
		out := runStrata(t, "consume", "--brokers", b.Addr, "--topic", topic, "--from-beginning", "--exit-at-end", "--format", `%S\n`)
		if strings.TrimSpace(out) != want {
			t.Errorf("%s holds records of sizes %q, want exactly one of %s", topic, lines(out), want)
		}
	}
}

func TestCLIConsumeStart(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, "s", 1, nil)
	base := time.UnixMilli(1714564800000) // 2024-05-01T12:00:00Z
	produceValues(t, b.Client(), "s", 0, 10, base)
	consume := func(args ...string) []string {
		t.Helper()
		return lines(runStrata(t, append([]string{"consume", "--brokers", b.Addr, "--topic", "s", "--exit-at-end"}, args...)...))
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--offset", "3"}, values(3, 10)},
		{[]string{"--offset", "-2"}, values(8, 10)},
		{[]string{"--offset", "-50"}, values(0, 10)},
		{[]string{"--offset", "start"}, values(0, 10)},
		{[]string{"--from-beginning"}, values(0, 10)},
		{[]string{"--offset", "end"}, nil},
		{nil, nil}, // the default start is the end
		{[]string{"--offset", "99"}, nil},
		{[]string{"--from-timestamp", fmt.Sprint(base.Add(4500 * time.Millisecond).UnixMilli())}, values(5, 10)},
		{[]string{"--from-timestamp", "2024-05-01T12:00:04Z"}, values(4, 10)},
		{[]string{"--from-timestamp", "2024-05-01T14:00:07+02:00"}, values(7, 10)},
		{[]string{"--from-timestamp", "2030-01-01T00:00:00Z"}, nil},
		{[]string{"--from-beginning", "--count", "3"}, values(0, 3)},
		{[]string{"--offset", "4", "--print-key", "--count", "1"}, []string{"k4\tv4"}},
		{[]string{"--offset", "4", "--format", "key:value", "--count", "1"}, []string{"k4\tv4"}},
		{[]string{"--offset", "-1", "--format", `%t|%p|%o|%k|%s|%T|%K|%S|%h\n`}, []string{fmt.Sprintf("s|0|9|k9|v9|%d|2|2|", base.Add(9*time.Second).UnixMilli())}},
	} {
		if got := consume(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("consume --exit-at-end %v printed %q, want %q", c.args, got, c.want)
		}
	}

	// A committed transaction ends in a marker past the last record;
	// --exit-at-end still ends.
	createTopic(t, adm, "txn", 1, nil)
	txn := b.Client(kgo.TransactionalID("cli-txn"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, txn, "txn", 0, 2, time.Now())
	if err := txn.EndTransaction(testCtx(t, 10*time.Second), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := lines(runStrata(t, "consume", "--brokers", b.Addr, "--topic", "txn", "--from-beginning", "--exit-at-end")); !slices.Equal(got, values(0, 2)) {
		t.Errorf("consume --exit-at-end of a committed transaction printed %q", got)
	}
}

// --group commits what it printed, and the next member resumes there;
// Ctrl-C ends a member with exit 0 after its final commit.
func TestCLIConsumeGroup(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, "g", 2, nil)
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, cl, "g", 0, 3, time.Now())
	produceValues(t, cl, "g", 1, 3, time.Now())
	committed := func(group string) int64 {
		t.Helper()
		offsets, err := adm.FetchOffsets(testCtx(t, 10*time.Second), group)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum
	}
	consume := []string{"consume", "--brokers", b.Addr, "--topic", "g", "--group", "cli"}
	first := lines(runStrata(t, append(consume, "--from-beginning", "--count", "4")...))
	if len(first) != 4 || committed("cli") != 4 {
		t.Fatalf("first member printed %q and committed %d offsets, want 4 and 4", first, committed("cli"))
	}
	// The group's commits, not --offset end, decide where the second starts.
	second := lines(runStrata(t, append(consume, "--offset", "end", "--count", "2")...))
	all := slices.Sorted(slices.Values(append(first, second...)))
	if want := []string{"v0", "v0", "v1", "v1", "v2", "v2"}; !slices.Equal(all, want) || committed("cli") != 6 {
		t.Errorf("two members printed %q then %q (committed %d); want every record once and 6 committed", first, second, committed("cli"))
	}

	// Without --group nothing is committed and no group appears.
	runStrata(t, "consume", "--brokers", b.Addr, "--topic", "g", "--from-beginning", "--count", "6")
	if groups, err := adm.ListGroups(testCtx(t, 10*time.Second)); err != nil || !slices.Equal(groups.Groups(), []string{"cli"}) {
		t.Errorf("groups after a consume without --group: %v, %v; want only cli", groups.Groups(), err)
	}

	cmd := exec.Command(strataBin, "consume", "--brokers", b.Addr, "--topic", "g", "--group", "sigint", "--from-beginning")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	printed := make(chan string, 6)
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			printed <- sc.Text()
		}
		close(printed)
	}()
	deadline := time.After(10 * time.Second)
	for n := 0; n < 6; n++ {
		select {
		case _, ok := <-printed:
			if !ok {
				t.Fatalf("the sigint member ended after %d records\n%s", n, stderr.String())
			}
		case <-deadline:
			t.Fatalf("the sigint member printed %d records in 10 s, want 6\n%s", n, stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume --group after SIGINT: %v, want exit 0\n%s", err, stderr.String())
	}
	if got := committed("sigint"); got != 6 {
		t.Errorf("after SIGINT the group committed %d offsets, want 6", got)
	}
}
