package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// replayBatch describes one batch of a test object. Every record i of it
// is at offset base+i with timestamp 1000+10*offset.
type replayBatch struct {
	base    int64
	values  []string
	pid     int64 // -1: not transactional
	marker  bool  // a control batch (one record) of pid
	commit  bool
	records []kmsg.Record // instead of values
}

func replayTS(offset int64) int64 { return 1000 + 10*offset }

func encodeReplayBatch(t *testing.T, b replayBatch) []byte {
	t.Helper()
	if b.marker {
		out := hotlog.MarkerBatch(b.pid, 0, b.commit, 0, replayTS(b.base))
		binary.BigEndian.PutUint64(out[0:], uint64(b.base)) // not covered by the batch CRC
		binary.BigEndian.PutUint32(out[12:], 0)             // leader epoch
		return out
	}
	recs := b.records
	for _, v := range b.values {
		recs = append(recs, kmsg.Record{Value: []byte(v)})
	}
	var raw []byte
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
		recs[i].TimestampDelta64 = int64(10 * i)
		recs[i].Length = 0
		recs[i].Length = int32(len(recs[i].AppendTo(nil)) - 1) // the zero Length varint took one byte
		raw = recs[i].AppendTo(raw)
	}
	h := recordbatch.Header{BaseOffset: b.base, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: replayTS(b.base),
		MaxTimestamp: replayTS(b.base + int64(len(recs)-1)), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if b.pid >= 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.Attributes = b.pid, 0, 0, 0x10 // transactional
	}
	return recordbatch.Encode(nil, h, int32(len(recs)), raw)
}

var replayTopicID = metadata.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// putReplayObject encodes batches as a segment object, puts it under
// cluster "c", topic "orders", and sets its ModTime to age seconds ago.
func putReplayObject(t *testing.T, bucket *tier.Bucket, dir string, partition, epoch int32, age int,
	aborted []hotlog.AbortedTxn, batches ...replayBatch) string {
	t.Helper()
	return putReplayObjectAs(t, bucket, dir, "orders", replayTopicID, partition, epoch, age, aborted, batches...)
}

// putReplayObjectAs is putReplayObject for any topic; it returns the key.
func putReplayObjectAs(t *testing.T, bucket *tier.Bucket, dir, topic string, id metadata.TopicID, partition, epoch int32,
	age int, aborted []hotlog.AbortedTxn, batches ...replayBatch) string {
	t.Helper()
	var log []byte
	for _, b := range batches {
		log = append(log, encodeReplayBatch(t, b)...)
	}
	obj, err := tier.EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), tier.SegmentMeta{Topic: topic,
		TopicID: id, Partition: partition, UploadEpoch: epoch, AbortedTxns: aborted})
	if err != nil {
		t.Fatal(err)
	}
	key, err := tier.SegmentKey(tier.SegmentKeyParts{Cluster: "c", Topic: topic, TopicID: id,
		Partition: partition, BaseOffset: obj.Footer().BaseOffset, Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Put(context.Background(), key, obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	mtime := time.Now().Add(-time.Duration(age) * time.Second)
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return key
}

// replayFixture writes partition 0:
//
//	A epoch 1 [0,9]:   v0..v4, txn pid 7 t5 t6 (aborted), v7 v8 v9
//	B epoch 1 [10,19]: abort marker pid 7 (entry {7, 5, 10}), v11..v15,
//	                   txn pid 8 t16 t17, commit marker pid 8, k19:0xfffe
//	C epoch 2 [8,14]:  a re-upload over A and B: c8 c9, abort marker, c11..c14
//	D epoch 1 [20,22]: v20, txn pid 9 t21 (no marker in the bucket), v22
//	E epoch 1 [0,12], a stale object with a newer ModTime but a lower epoch
//
// and partition 1: p1-0, p1-1, p1-2. Expected choice: A for [0,7], C for
// [8,14], B for [15,19], D for [20,22]; E loses everywhere (epoch 0).
func replayFixture(t *testing.T) string {
	dir := t.TempDir()
	bucket, err := tier.OpenURL(context.Background(), "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	abort7 := []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: 5, LastOffset: 10, LastStableOffset: 5}}
	putReplayObject(t, bucket, dir, 0, 1, 30, nil,
		replayBatch{base: 0, values: []string{"v0", "v1", "v2", "v3", "v4"}, pid: -1},
		replayBatch{base: 5, values: []string{"t5", "t6"}, pid: 7},
		replayBatch{base: 7, values: []string{"v7", "v8", "v9"}, pid: -1})
	last := kmsg.Record{Key: []byte("k19"), Value: []byte{0xff, 0xfe}, Headers: []kmsg.Header{{Key: "hk", Value: []byte("hv")}}}
	putReplayObject(t, bucket, dir, 0, 1, 20, abort7,
		replayBatch{base: 10, pid: 7, marker: true},
		replayBatch{base: 11, values: []string{"v11", "v12", "v13", "v14", "v15"}, pid: -1},
		replayBatch{base: 16, values: []string{"t16", "t17"}, pid: 8},
		replayBatch{base: 18, pid: 8, marker: true, commit: true},
		replayBatch{base: 19, records: []kmsg.Record{last}, pid: -1})
	putReplayObject(t, bucket, dir, 0, 2, 25, abort7,
		replayBatch{base: 8, values: []string{"c8", "c9"}, pid: -1},
		replayBatch{base: 10, pid: 7, marker: true},
		replayBatch{base: 11, values: []string{"c11", "c12", "c13", "c14"}, pid: -1})
	putReplayObject(t, bucket, dir, 0, 1, 10, nil,
		replayBatch{base: 20, values: []string{"v20"}, pid: -1},
		replayBatch{base: 21, values: []string{"t21"}, pid: 9},
		replayBatch{base: 22, values: []string{"v22"}, pid: -1})
	putReplayObject(t, bucket, dir, 0, 0, 1, nil,
		replayBatch{base: 0, values: []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9", "e10", "e11", "e12"}, pid: -1})
	putReplayObject(t, bucket, dir, 1, 1, 10, nil,
		replayBatch{base: 0, values: []string{"p1-0", "p1-1", "p1-2"}, pid: -1})
	// A topic whose name extends "orders-": listed with it, never replayed.
	putReplayObjectAs(t, bucket, dir, "orders-x", metadata.TopicID{9: 9}, 0, 9, 0, nil,
		replayBatch{base: 0, values: []string{"other"}, pid: -1})
	return "file://" + dir
}

// runReplayCmd runs `strata replay` with args and returns stdout, stderr.
func runReplayCmd(t *testing.T, wantCode int, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	if code := run(context.Background(), c, append([]string{"replay"}, args...)); code != wantCode {
		t.Fatalf("replay %v: exit %d, want %d; stderr:\n%s", args, code, wantCode, stderr.String())
	}
	return stdout.String(), stderr.String()
}

func TestReplayRangesAndIsolation(t *testing.T) {
	store := replayFixture(t)
	base := []string{"--object-store", store, "--cluster", "c", "--topic", "orders"}
	lines := func(vals ...string) string { return strings.Join(vals, "\n") + "\n" }
	const (
		end0  = "the bucket ends at offset 22 (1970-01-01T00:00:01.22Z)"
		end1  = "the bucket ends at offset 2 (1970-01-01T00:00:01.02Z)"
		noTo  = "; no --to: stopped at the bucket's end"
		noTJ  = "strata replay: the bucket has no topic.json for topic orders: replaying the partitions that have objects (a partition without any is not known)\n"
		held0 = "strata replay: partition 0: stopped at offset 21: a transaction there has no commit or abort marker in the bucket (still open, or its marker is not uploaded yet)\n"
	)
	cases := []struct {
		name       string
		args       []string
		want       string
		wantStderr string
	}{
		{"committed, all partitions", []string{"--from", "0"},
			lines("v0", "v1", "v2", "v3", "v4", "v7", "c8", "c9", "c11", "c12", "c13", "c14", "v15", "t16", "t17", "\xff\xfe",
				"v20", "p1-0", "p1-1", "p1-2"),
			noTJ + held0 + "strata replay: partition 0: replayed offsets 0-20; " + end0 + noTo + "\n" +
				"strata replay: partition 1: replayed offsets 0-2; " + end1 + noTo + "\n"},
		{"uncommitted", []string{"--from", "0", "--partitions", "0", "--isolation", "read_uncommitted"},
			lines("v0", "v1", "v2", "v3", "v4", "t5", "t6", "v7", "c8", "c9", "c11", "c12", "c13", "c14", "v15", "t16", "t17",
				"\xff\xfe", "v20", "t21", "v22"), "strata replay: partition 0: replayed offsets 0-22; " + end0 + noTo + "\n"},
		{"offsets inclusive", []string{"--from", "6", "--to", "12", "--partitions", "0"},
			lines("v7", "c8", "c9", "c11", "c12"), "strata replay: partition 0: replayed offsets 7-12; " + end0 + "\n"},
		{"offset: prefix", []string{"--from", "offset:13", "--to", "offset:17", "--partitions", "0"},
			lines("c13", "c14", "v15", "t16", "t17"), "strata replay: partition 0: replayed offsets 13-17; " + end0 + "\n"},
		{"an abort's marker after --to", []string{"--from", "4", "--to", "7", "--partitions", "0"},
			lines("v4", "v7"), "strata replay: partition 0: replayed offsets 4-7; " + end0 + "\n"},
		{"times", []string{"--from", "ms:1075", "--to", time.UnixMilli(replayTS(16)).UTC().Format(time.RFC3339Nano), "--partitions", "0"},
			lines("c8", "c9", "c11", "c12", "c13", "c14", "v15", "t16"), "strata replay: partition 0: replayed offsets 8-16; " + end0 + "\n"},
		{"partition 1 by time", []string{"--from", "ms:1005", "--partitions", "1"}, lines("p1-1", "p1-2"),
			"strata replay: partition 1: replayed offsets 1-2; " + end1 + noTo + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut := runReplayCmd(t, 0, append(base, tc.args...)...)
			if out != tc.want {
				t.Errorf("stdout:\n%q\nwant:\n%q", out, tc.want)
			}
			if errOut != tc.wantStderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", errOut, tc.wantStderr)
			}
		})
	}
}

func TestReplayFormats(t *testing.T) {
	store := replayFixture(t)
	base := []string{"--object-store", store, "--cluster", "c", "--topic", "orders", "--partitions", "0", "--from", "15", "--to", "19"}
	out, _ := runReplayCmd(t, 0, append(base, "--format", "json")...)
	want := `{"topic":"orders","partition":0,"offset":15,"timestamp":1150,"key":null,"value":"djE1","headers":[]}
{"topic":"orders","partition":0,"offset":16,"timestamp":1160,"key":null,"value":"dDE2","headers":[]}
{"topic":"orders","partition":0,"offset":17,"timestamp":1170,"key":null,"value":"dDE3","headers":[]}
{"topic":"orders","partition":0,"offset":19,"timestamp":1190,"key":"azE5","value":"//4=","headers":[{"key":"hk","value":"aHY="}]}
`
	if out != want {
		t.Errorf("json:\n%s\nwant:\n%s", out, want)
	}
	out, _ = runReplayCmd(t, 0, append(base, "--format", "kcat", "--to", "16")...)
	want = `{"topic":"orders","partition":0,"offset":15,"tstype":"create","ts":1150,"broker":-1,"key":null,"payload":"v15"}
{"topic":"orders","partition":0,"offset":16,"tstype":"create","ts":1160,"broker":-1,"key":null,"payload":"t16"}
`
	if out != want {
		t.Errorf("kcat:\n%s\nwant:\n%s", out, want)
	}
	out, _ = runReplayCmd(t, 0, append(base, "--format", "kcat", "--from", "19")...)
	want = "{\"topic\":\"orders\",\"partition\":0,\"offset\":19,\"tstype\":\"create\",\"ts\":1190,\"broker\":-1," +
		"\"headers\":[\"hk\",\"hv\"],\"key\":\"k19\",\"payload\":\"\xff\xfe\"}\n"
	if out != want {
		t.Errorf("kcat:\n%q\nwant:\n%q", out, want)
	}
}

func TestReplayUsageErrors(t *testing.T) {
	store := replayFixture(t)
	base := []string{"--object-store", store, "--cluster", "c"}
	for _, args := range [][]string{
		{"--topic", "orders"}, // no --from
		{"--topic", "orders", "--from", "yesterday"},
		{"--topic", "orders", "--from", "10", "--to", "5"},
		{"--topic", "orders", "--from", "0", "--format", "xml"},
		{"--topic", "orders", "--from", "0", "--isolation", "serializable"},
		{"--topic", "orders", "--from", "0", "--partitions", "x"},
	} {
		runReplayCmd(t, 2, append(base, args...)...)
	}
	if _, errOut := runReplayCmd(t, 1, append(base, "--topic", "nope", "--from", "0")...); !strings.Contains(errOut, "no objects") {
		t.Errorf("missing topic: %q", errOut)
	}
	if _, errOut := runReplayCmd(t, 1, append(base, "--topic", "orders", "--from", "0", "--partitions", "5")...); !strings.Contains(errOut, "partition 5") {
		t.Errorf("missing partition: %q", errOut)
	}
}

func TestParseReplayBound(t *testing.T) {
	for in, want := range map[string]replayBound{
		"42":                          {set: true, value: 42},
		"offset:7":                    {set: true, value: 7},
		"ms:1700000000000":            {set: true, isTime: true, value: 1700000000000},
		"2026-01-02T15:04:05Z":        {set: true, isTime: true, value: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC).UnixMilli()},
		"2026-01-02T15:04:05.5+01:00": {set: true, isTime: true, value: time.Date(2026, 1, 2, 14, 4, 5, 5e8, time.UTC).UnixMilli()},
	} {
		got, err := parseReplayBound("from", in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "offset:x", "ms:", "2026-01-02", "12abc"} {
		if _, err := parseReplayBound("from", in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// TestReplayIncarnationsAndCorruption: a re-created topic needs --topic-id;
// a damaged object fails the replay instead of printing its bytes.
func TestReplayIncarnationsAndCorruption(t *testing.T) {
	store := replayFixture(t)
	dir := strings.TrimPrefix(store, "file://")
	bucket, err := tier.OpenURL(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	otherID := metadata.TopicID{7: 7}
	key := putReplayObjectAs(t, bucket, dir, "orders", otherID, 0, 1, 0, nil,
		replayBatch{base: 0, values: []string{"new0", "new1"}, pid: -1})
	base := []string{"--object-store", store, "--cluster", "c", "--topic", "orders", "--from", "0"}
	if _, errOut := runReplayCmd(t, 1, base...); !strings.Contains(errOut, "several incarnations") ||
		!strings.Contains(errOut, otherID.String()) {
		t.Errorf("two incarnations: %q", errOut)
	}
	if out, _ := runReplayCmd(t, 0, append(base, "--topic-id", otherID.String())...); out != "new0\nnew1\n" {
		t.Errorf("--topic-id: %q", out)
	}
	path := filepath.Join(dir, filepath.FromSlash(key))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[bytes.Index(b, []byte("new1"))] ^= 1 // a record's byte: the chunk and batch CRCs fail
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut := runReplayCmd(t, 1, append(base, "--topic-id", otherID.String())...); !strings.Contains(errOut, "corrupt") || out != "" {
		t.Errorf("corrupt object: stdout %q, stderr %q", out, errOut)
	}
}

func TestReplayProgress(t *testing.T) {
	var buf bytes.Buffer
	p := &replayProgress{w: &buf, total: 4 << 20, start: time.Now().Add(-2 * time.Second)}
	p.update(10, 1<<20)
	p.finish(20)
	if got := buf.String(); !strings.Contains(got, "10 records  1.0 MiB / ~4.0 MiB  512.0 KiB/s  ETA 6s") || !strings.HasSuffix(got, "\n") {
		t.Errorf("progress %q", got)
	}
	if isTerminal(&buf) || newReplayProgress(&buf).w != nil {
		t.Error("a buffer is not a terminal")
	}
}

// replayEndFixture writes topic "orders" with a topic.json of 4 partitions:
//
//	partition 0: [0,4] and [10,14]: a hole at 5-9
//	partition 1: [0,2]
//	partition 2: no objects
//	partition 3: [100,102]: retention deleted what came before
//
// Record i is "a<i>" with timestamp replayTS(i) (1000+10*i ms).
func replayEndFixture(t *testing.T) string {
	dir := t.TempDir()
	bucket, err := tier.OpenURL(context.Background(), "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	values := func(from, n int) []string {
		var out []string
		for i := from; i < from+n; i++ {
			out = append(out, "a"+strconv.Itoa(i))
		}
		return out
	}
	putReplayObject(t, bucket, dir, 0, 1, 20, nil, replayBatch{base: 0, values: values(0, 5), pid: -1})
	putReplayObject(t, bucket, dir, 0, 1, 10, nil, replayBatch{base: 10, values: values(10, 5), pid: -1})
	putReplayObject(t, bucket, dir, 1, 1, 10, nil, replayBatch{base: 0, values: values(0, 3), pid: -1})
	putReplayObject(t, bucket, dir, 3, 1, 10, nil, replayBatch{base: 100, values: values(100, 3), pid: -1})
	file, err := tier.EncodeTopicFile(tier.TopicFile{Topic: "orders", TopicID: replayTopicID.String(), Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	key := tier.TopicConfigKey("c", "orders", replayTopicID)
	if err := bucket.Put(context.Background(), key, bytes.NewReader(file), int64(len(file))); err != nil {
		t.Fatal(err)
	}
	return "file://" + dir
}

// TestReplayBucketEnd: each partition's line says what was replayed and
// where the bucket ends; a range the bucket does not wholly hold fails
// after writing what it holds, unless --allow-partial.
func TestReplayBucketEnd(t *testing.T) {
	store := replayEndFixture(t)
	base := []string{"--object-store", store, "--cluster", "c", "--topic", "orders"}
	const (
		line1 = "strata replay: partition 1: replayed offsets 0-2; the bucket ends at offset 2 (1970-01-01T00:00:01.02Z)"
		noTo  = "; no --to: stopped at the bucket's end"
		fail  = "strata replay: replay: the bucket does not hold all of the requested range; what it holds was written " +
			"(--allow-partial accepts a partial range):\n  "
		warn = "strata replay: warning (--allow-partial): the bucket does not hold all of the requested range:\n  "
	)
	cases := []struct {
		name    string
		args    []string
		code    int
		stdout  string // "" : not checked
		stderr  []string
		without string // must not be in stderr ("" : not checked)
	}{
		{"no --to stops at the bucket's end", []string{"--partitions", "1", "--from", "0"}, 0, "a0\na1\na2\n",
			[]string{line1 + noTo + "\n"}, "warning"},
		{"--to at the bucket's end", []string{"--partitions", "1", "--from", "0", "--to", "2"}, 0, "a0\na1\na2\n",
			[]string{line1 + "\n"}, "past"},
		{"--to offset past the end", []string{"--partitions", "1", "--from", "0", "--to", "5"}, 1, "a0\na1\na2\n",
			[]string{line1 + "; --to 5 is past it\n", fail + "partition 1: offsets 3-5: past the bucket's end\n"}, ""},
		{"--allow-partial warns", []string{"--partitions", "1", "--from", "0", "--to", "5", "--allow-partial"}, 0, "a0\na1\na2\n",
			[]string{line1 + "; --to 5 is past it\n", warn + "partition 1: offsets 3-5: past the bucket's end\n"}, "does not hold all of the requested range;"},
		{"--from and --to past the end", []string{"--partitions", "1", "--from", "7", "--to", "9"}, 1, "",
			[]string{"partition 1: replayed nothing;", "partition 1: offsets 7-9: past the bucket's end"}, ""},
		{"--from past the end, no --to", []string{"--partitions", "1", "--from", "7"}, 0, "",
			[]string{"strata replay: partition 1: replayed nothing; the bucket ends at offset 2 (1970-01-01T00:00:01.02Z)" + noTo}, ""},
		{"--to time past the end", []string{"--partitions", "1", "--from", "0", "--to", "ms:1021"}, 1, "a0\na1\na2\n",
			[]string{line1 + "; --to 1970-01-01T00:00:01.021Z is later than its last record\n", "partition 1: records after offset 2 up to " +
				"1970-01-01T00:00:01.021Z: the bucket ends at 1970-01-01T00:00:01.02Z and cannot tell whether later records exist"}, ""},
		{"--to time at the end", []string{"--partitions", "1", "--from", "0", "--to", "ms:1020"}, 0, "a0\na1\na2\n",
			[]string{line1 + "\n"}, "later"},
		{"a partition of topic.json with no objects", []string{"--from", "0", "--allow-partial"}, 0,
			"a0\na1\na2\na3\na4\na10\na11\na12\na13\na14\na0\na1\na2\na100\na101\na102\n",
			[]string{"strata replay: partition 2: the bucket holds nothing of this partition\n",
				warn + "partition 0: offsets 5-9: a hole, no object of the bucket holds them\n  partition 2: nothing in the bucket\n"}, ""},
		{"a missing partition fails", []string{"--from", "0", "--partitions", "2"}, 1, "",
			[]string{fail + "partition 2: nothing in the bucket\n"}, ""},
		{"not a partition of the topic", []string{"--from", "0", "--partitions", "7"}, 1, "",
			[]string{"partition 7: the bucket holds nothing of this partition (topic.json: the topic has 4 partitions)",
				"partition 7: not a partition of the topic"}, ""},
		{"a hole inside the range", []string{"--partitions", "0", "--from", "0", "--to", "12"}, 1, "a0\na1\na2\na3\na4\na10\na11\na12\n",
			[]string{"strata replay: partition 0: replayed offsets 0-12; the bucket ends at offset 14 (1970-01-01T00:00:01.14Z); " +
				"a hole at offsets 5-9 (no object holds it)\n", fail + "partition 0: offsets 5-9: a hole, no object of the bucket holds them\n"}, ""},
		{"a hole partly inside", []string{"--partitions", "0", "--from", "7", "--to", "12"}, 1, "a10\na11\na12\n",
			[]string{"partition 0: offsets 7-9: a hole"}, ""},
		{"a hole before --from", []string{"--partitions", "0", "--from", "10", "--to", "12"}, 0, "a10\na11\na12\n",
			[]string{"strata replay: partition 0: replayed offsets 10-12; the bucket ends at offset 14 (1970-01-01T00:00:01.14Z)\n"}, "hole"},
		{"a time --from inside the hole", []string{"--partitions", "0", "--from", "ms:1070", "--to", "12"}, 1, "a10\na11\na12\n",
			[]string{"partition 0: offsets 5-9: a hole"}, ""},
		{"a time --to reached before the hole", []string{"--partitions", "0", "--from", "0", "--to", "ms:1030"}, 0, "a0\na1\na2\na3\n",
			nil, "hole"},
		{"--from below the bucket's start", []string{"--partitions", "3", "--from", "50"}, 1, "a100\na101\na102\n",
			[]string{"partition 3: replayed offsets 100-102; the bucket starts at offset 100 (1970-01-01T00:00:02Z);",
				"partition 3: offsets 50-99: before the bucket's start (deleted by retention, or never uploaded)"}, ""},
		{"--from 0 is the beginning", []string{"--partitions", "3", "--from", "0"}, 0, "a100\na101\na102\n",
			[]string{"strata replay: partition 3: replayed offsets 100-102; the bucket starts at offset 100 (1970-01-01T00:00:02Z); " +
				"the bucket ends at offset 102 (1970-01-01T00:00:02.02Z)" + noTo + "\n"}, "warning"},
		{"a time --from before the bucket is the beginning", []string{"--partitions", "3", "--from", "ms:0"}, 0, "a100\na101\na102\n",
			[]string{"the bucket starts at offset 100"}, "warning"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut := runReplayCmd(t, tc.code, append(base, tc.args...)...)
			if tc.stdout != "" && out != tc.stdout {
				t.Errorf("stdout %q, want %q", out, tc.stdout)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr:\n%s\nwant in it:\n%s", errOut, want)
				}
			}
			if tc.without != "" && strings.Contains(errOut, tc.without) {
				t.Errorf("stderr:\n%s\nhas %q", errOut, tc.without)
			}
		})
	}
}

// TestReplayUnusableTopicFile: a damaged topic.json is named, and replay
// falls back to the partitions that have objects.
func TestReplayUnusableTopicFile(t *testing.T) {
	store := replayFixture(t)
	dir := strings.TrimPrefix(store, "file://")
	key := tier.TopicConfigKey("c", "orders", replayTopicID)
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(key)), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut := runReplayCmd(t, 0, "--object-store", store, "--cluster", "c", "--topic", "orders", "--from", "0",
		"--isolation", "read_uncommitted")
	if !strings.Contains(errOut, "topic.json") || !strings.Contains(errOut, "replaying the partitions that have objects") ||
		!strings.Contains(errOut, "partition 1: replayed offsets 0-2") || strings.Contains(errOut, "partition 2") {
		t.Errorf("stderr:\n%s", errOut)
	}
}
