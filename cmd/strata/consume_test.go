package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testRecord() *kgo.Record {
	return &kgo.Record{
		Topic: "orders", Partition: 2, Offset: 41,
		Key: []byte("k1"), Value: []byte("v<1>&"),
		Timestamp: time.UnixMilli(1714564800123),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("")}},
	}
}

func TestRecordFormats(t *testing.T) {
	nullKey := testRecord()
	nullKey.Key = nil
	for _, c := range []struct {
		format string
		record *kgo.Record
		want   string
	}{
		{"value", testRecord(), "v<1>&\n"},
		{"key:value", testRecord(), "k1\tv<1>&\n"},
		{`%t/%p@%o %k=%s ts=%T [%h] %K %S\n`, testRecord(), "orders/2@41 k1=v<1>& ts=1714564800123 [a=1,b=] 2 5\n"},
		{`100%% %s\t|\\\r\n`, testRecord(), "100% v<1>&\t|\\\r\n"},
		{`%K:%k:%S`, nullKey, "-1::5"},
		{`%s`, testRecord(), "v<1>&"}, // no newline unless asked for
	} {
		f, err := parseRecordFormat(c.format)
		if err != nil {
			t.Fatalf("%q: %v", c.format, err)
		}
		var out bytes.Buffer
		if err := f(&out, c.record); err != nil {
			t.Fatal(err)
		}
		if out.String() != c.want {
			t.Errorf("%q printed %q, want %q", c.format, out.String(), c.want)
		}
	}
}

func TestRecordFormatErrors(t *testing.T) {
	for _, format := range []string{"", "values", "%x", `%`, `abc\`, `\q`, "key=value"} {
		if _, err := parseRecordFormat(format); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", format, err)
		}
	}
}

func TestJSONRecordEncoding(t *testing.T) {
	r := testRecord()
	r.Value = []byte{0xff, 0x00, 'x'}                           // not UTF-8
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "nil"}) // null value
	var out bytes.Buffer
	if err := writeJSONRecord(&out, r); err != nil {
		t.Fatal(err)
	}
	const want = `{"topic":"orders","partition":2,"offset":41,"timestamp":1714564800123,"key":"k1","value_base64":"/wB4",` +
		`"headers":[{"key":"a","value":"1"},{"key":"b","value":""},{"key":"nil","value":null}]}` + "\n"
	if out.String() != want {
		t.Errorf("got  %s\nwant %s", out.String(), want)
	}
	r = testRecord()
	r.Key, r.Headers = nil, nil
	out.Reset()
	if err := writeJSONRecord(&out, r); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if k, ok := back["key"]; !ok || k != nil || back["value"] != "v<1>&" || !bytes.Contains(out.Bytes(), []byte(`"v<1>&"`)) {
		t.Errorf("null key and HTML characters: %s", out.String())
	}
	if h, ok := back["headers"].([]any); !ok || len(h) != 0 {
		t.Errorf("no headers must print [], got %s", out.String())
	}
}

func TestParseStart(t *testing.T) {
	for _, c := range []struct {
		offset, fromTimestamp string
		fromBeginning         bool
		want                  startSpec
	}{
		{"", "", false, startSpec{kind: startAtEnd}},
		{"", "", true, startSpec{kind: startAtStart}},
		{"start", "", false, startSpec{kind: startAtStart}},
		{"end", "", false, startSpec{kind: startAtEnd}},
		{"0", "", false, startSpec{kind: startAtOffset, n: 0}},
		{"17", "", false, startSpec{kind: startAtOffset, n: 17}},
		{"-5", "", false, startSpec{kind: startFromEnd, n: 5}},
		{"", "1714564800123", false, startSpec{kind: startAtTime, n: 1714564800123}},
		{"", "2024-05-01T12:00:00Z", false, startSpec{kind: startAtTime, n: 1714564800000}},
		{"", "2024-05-01T14:00:00.5+02:00", false, startSpec{kind: startAtTime, n: 1714564800500}},
	} {
		got, err := parseStart(c.offset, c.fromTimestamp, c.fromBeginning)
		if err != nil || got != c.want {
			t.Errorf("parseStart(%q, %q, %v) = %+v, %v; want %+v", c.offset, c.fromTimestamp, c.fromBeginning, got, err, c.want)
		}
	}
	for _, bad := range [][3]string{
		{"x", "", ""}, {"1.5", "", ""}, {"", "yesterday", ""}, {"", "-3", ""}, {"", "2024-05-01", ""},
		{"5", "1000", ""}, {"5", "", "true"}, {"", "1000", "true"},
	} {
		if _, err := parseStart(bad[0], bad[1], bad[2] == "true"); !errors.Is(err, errUsage) {
			t.Errorf("parseStart(%q, %q, %s): %v, want a usage error", bad[0], bad[1], bad[2], err)
		}
	}
}

func TestStartResolve(t *testing.T) {
	b := partitionBounds{logStart: 10, highWatermark: 20, atTime: 14}
	for _, c := range []struct {
		spec startSpec
		want int64
	}{
		{startSpec{kind: startAtEnd}, 20},
		{startSpec{kind: startAtStart}, 10},
		{startSpec{kind: startAtOffset, n: 15}, 15},
		{startSpec{kind: startAtOffset, n: 3}, 10},  // below the log start
		{startSpec{kind: startAtOffset, n: 99}, 20}, // past the HW
		{startSpec{kind: startFromEnd, n: 3}, 17},
		{startSpec{kind: startFromEnd, n: 50}, 10},
		{startSpec{kind: startAtTime, n: 1}, 14},
	} {
		if got := c.spec.resolve(b); got != c.want {
			t.Errorf("%+v.resolve(%+v) = %d, want %d", c.spec, b, got, c.want)
		}
	}
}

func TestParsePartitions(t *testing.T) {
	got, err := parsePartitions("3, 1,3,0")
	if err != nil || len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Errorf("parsePartitions = %v, %v; want [0 1 3]", got, err)
	}
	for _, bad := range []string{"", "a", "-1", "1,,2", "4294967296"} {
		if _, err := parsePartitions(bad); !errors.Is(err, errUsage) {
			t.Errorf("parsePartitions(%q): %v, want a usage error", bad, err)
		}
	}
}

func TestEndTracker(t *testing.T) {
	ends := &endTracker{unread: map[int32]int64{0: 3, 1: 1}}
	seen := func(p int32, o int64) bool { return ends.wanted(&kgo.Record{Partition: p, Offset: o}) }
	if !seen(0, 1) || ends.done() {
		t.Fatal("offset 1 of 3 is wanted and not the end")
	}
	if !seen(1, 0) || !seen(0, 2) || !ends.done() {
		t.Fatal("the last offsets below each HW are wanted and end the read")
	}
	if seen(0, 3) || seen(2, 0) {
		t.Fatal("records at or past the HW, or of other partitions, are not wanted")
	}
	var none *endTracker
	if none.done() || !none.wanted(&kgo.Record{Offset: 1 << 40}) {
		t.Fatal("a nil tracker never ends and wants everything")
	}
}

func TestConsumeUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--topic", "t", "--count", "-1"},
		{"--topic", "t", "--group", "g", "--partition", "0"},
		{"--topic", "t", "--group", "g", "--exit-at-end"},
		{"--topic", "t", "--print-key", "--format", "json"},
		{"--topic", "t", "--format", "bogus"},
		{"--topic", "t", "--offset", "soon"},
		{"--topic", "t", "--partition", "x"},
	} {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if err := runConsume(context.Background(), c, args); !errors.Is(err, errUsage) {
			t.Errorf("consume %v: %v, want a usage error", args, err)
		}
	}
}
