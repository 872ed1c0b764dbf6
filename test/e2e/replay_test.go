package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// replayProduced is one record as produced, with the answer of the broker.
type replayProduced struct {
	partition int32
	offset    int64
	ts        time.Time
	key       string
	value     string
	committed bool // false: in an aborted transaction
}

// TestReplayFromBucketWithoutBroker: records with
// known timestamps, plain and in committed and aborted transactions, are
// tiered to a file bucket; with the broker stopped, `strata replay --from
// T1 --to T2` prints exactly the produced records of that time range
// (read_committed: without the aborted ones), and an offset range in
// read_uncommitted prints every record of it.
func TestReplayFromBucketWithoutBroker(t *testing.T) {
	objects := t.TempDir()
	b := StartBroker(t, withArgs("--object-store", "file://"+objects,
		"--tier-upload-interval", "250ms", "--log-retention-check-interval", "250ms"))
	const topic, partitions = "replayed", 2
	createTopic(t, b.Admin(), topic, partitions, map[string]string{
		"internal.segment.bytes": "16384", "local.retention.bytes": "32768", "retention.ms": "-1"})
	produced := produceForReplay(t, b, topic, partitions)

	// T1 and T2 are the timestamps of records a quarter and 60% in.
	t1, t2 := produced[len(produced)/4].ts, produced[len(produced)*6/10].ts
	last := map[int32]int64{}
	for _, r := range produced {
		if !r.ts.After(t2) {
			last[r.partition] = max(last[r.partition], r.offset)
		}
	}
	// Tiered past last[p] by a transaction's length, so that a transaction
	// holding last[p] has its marker in the bucket too.
	testkit.WaitFor(t, 90*time.Second, "the range tiered and the local log start moved", func() bool {
		s := fetchTierStatus(t, b, topic)
		for p := range int32(partitions) {
			if s[p].TieredEnd <= last[p]+3 || s[p].LocalStart == 0 {
				return false
			}
		}
		return true
	})
	// kcat -C -J from the broker, for the --format kcat comparison below.
	kcat := testkit.NeedBinary(t, "kcat")
	kcatOut := runKcat(t, kcat, "", "-b", b.Addr, "-C", "-J", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
		"-c", fmt.Sprint(last[0]/2))
	if err := b.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	args := []string{"replay", "--object-store", "file://" + objects, "--cluster", b.Cluster, "--topic", topic}
	out := runReplayBinary(t, append(args, "--from", t1.UTC().Format(time.RFC3339), "--to", t2.UTC().Format(time.RFC3339),
		"--format", "json")...)
	var wantRecs []replayProduced
	aborted := 0
	for p := range int32(partitions) {
		for _, r := range produced {
			if r.partition == p && !r.ts.Before(t1) && !r.ts.After(t2) {
				if r.committed {
					wantRecs = append(wantRecs, r)
				} else {
					aborted++
				}
			}
		}
	}
	if aborted == 0 {
		t.Fatal("no aborted record in [T1, T2]: the test would not check read_committed")
	}
	checkReplayJSON(t, topic, out, wantRecs)

	// kcat's JSON lines, but for the broker id (replay has none). Up to
	// last[0]: the bucket may end inside a later transaction, whose
	// records replay rightly withholds, saying so.
	out = runReplayBinary(t, append(args, "--partitions", "0", "--from", "0", "--to", fmt.Sprint(last[0]), "--format", "kcat")...)
	want := strings.ReplaceAll(kcatOut, fmt.Sprintf(`"broker":%d,`, b.NodeID), `"broker":-1,`)
	n := strings.Count(want, "\n")
	if n != int(last[0]/2) || !strings.Contains(want, `"broker":-1,`) {
		t.Fatalf("kcat -J printed %d lines, want %d:\n%s", n, last[0]/2, firstLines(kcatOut))
	}
	if got := strings.Join(strings.SplitAfter(out, "\n")[:n], ""); got != want {
		t.Fatalf("replay --format kcat:\n%s\nkcat -J:\n%s", firstLines(got), firstLines(want))
	}

	// read_uncommitted, an offset range of partition 1, raw values.
	from, to := last[1]/3, last[1]
	out = runReplayBinary(t, append(args, "--partitions", "1", "--from", fmt.Sprint(from), "--to", fmt.Sprint(to),
		"--isolation", "read_uncommitted")...)
	var wantRaw strings.Builder
	for _, r := range produced {
		if r.partition == 1 && r.offset >= from && r.offset <= to {
			wantRaw.WriteString(r.value + "\n")
		}
	}
	if out != wantRaw.String() {
		t.Fatalf("raw replay of partition 1 [%d, %d]:\n%s\nwant:\n%s", from, to, firstLines(out), firstLines(wantRaw.String()))
	}
}

// produceForReplay writes 8 rounds; each writes 20 plain records per
// partition, then a transaction of 2 records per partition, committed on
// even rounds. Timestamps go up by one second per record, from an hour ago.
func produceForReplay(t *testing.T, b *Broker, topic string, partitions int32) []replayProduced {
	t.Helper()
	plain := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	txn := txnClient(t, b, "replay-txn")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	seq := 0
	build := func(n int, tag string) []*kgo.Record {
		var rs []*kgo.Record
		for i := range n {
			p := int32(i) % partitions
			seq++
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Timestamp: t0.Add(time.Duration(seq) * time.Second),
				Key: fmt.Appendf(nil, "k%d", seq), Value: fmt.Appendf(nil, "%s-%05d-%s", tag, seq, strings.Repeat("x", 600)),
				Headers: []kgo.RecordHeader{{Key: "seq", Value: fmt.Appendf(nil, "%d", seq)}}})
		}
		return rs
	}
	var out []replayProduced
	add := func(committed bool, rs []*kgo.Record) {
		for _, r := range rs {
			out = append(out, replayProduced{r.Partition, r.Offset, r.Timestamp, string(r.Key), string(r.Value), committed})
		}
	}
	for round := range 8 {
		add(true, produceSync(t, plain, build(20*int(partitions), "plain")...))
		commit := round%2 == 0
		add(commit, runTxn(t, txn, commit, build(2*int(partitions), fmt.Sprintf("txn%v", commit))...))
	}
	return out
}

// runReplayBinary runs the strata binary with args, wants exit 0 and
// nothing on stderr (not a terminal: no progress), and returns stdout.
func runReplayBinary(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(strataBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("strata %v: %v\n%s", args, err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
		if line != "" && !isBucketEndReport(line) {
			t.Errorf("strata %v wrote to stderr: %s", args, stderr.String())
			break
		}
	}
	return stdout.String()
}

// isBucketEndReport reports whether line is replay's per-partition account
// of what it served and where the bucket ends: the only stderr output a
// whole, successful replay has.
func isBucketEndReport(line string) bool {
	return strings.HasPrefix(line, "strata replay: partition ") && strings.Contains(line, "the bucket ends at offset")
}

// checkReplayJSON compares replay's JSON lines with the records wanted.
func checkReplayJSON(t *testing.T, topic, out string, want []replayProduced) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		lines = nil
	}
	if len(lines) != len(want) {
		t.Fatalf("%d records, want %d; output starts:\n%s", len(lines), len(want), firstLines(out))
	}
	for i, line := range lines {
		var got struct { // key and values are base64 (DESIGN.md §11): []byte decodes them
			Topic     string
			Partition int32
			Offset    int64
			Timestamp int64
			Key       []byte
			Value     []byte
			Headers   []struct {
				Key   string
				Value []byte
			}
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		w := want[i]
		seq := strings.TrimPrefix(w.key, "k")
		if got.Topic != topic || got.Partition != w.partition || got.Offset != w.offset || got.Timestamp != w.ts.UnixMilli() ||
			string(got.Key) != w.key || string(got.Value) != w.value || len(got.Headers) != 1 || got.Headers[0].Key != "seq" ||
			string(got.Headers[0].Value) != seq {
			t.Fatalf("line %d: %s\nwant partition %d offset %d ts %d key %s value %.20s...", i, line, w.partition, w.offset,
				w.ts.UnixMilli(), w.key, w.value)
		}
	}
}

func firstLines(s string) string {
	lines := strings.SplitN(s, "\n", 6)
	for i, l := range lines {
		if len(l) > 60 {
			lines[i] = l[:60] + "..."
		}
	}
	return strings.Join(lines, "\n")
}
