package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCompactDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{999 * time.Millisecond, "0s"},
		{45 * time.Second, "45s"},
		{time.Minute, "1m0s"},
		{3*time.Minute + 12*time.Second + 900*time.Millisecond, "3m12s"}, // truncated, not rounded
		{time.Hour, "1h0m"},
		{5*time.Hour + 12*time.Minute + 59*time.Second, "5h12m"},
		{48*time.Hour - time.Second, "47h59m"},
		{48 * time.Hour, "2d0h"},
		{51*time.Hour + 30*time.Minute, "2d3h"},
		{secondsDuration(math.Inf(1)), "106751d23h"}, // saturated, not overflowed
	} {
		if got := compactDuration(tc.d); got != tc.want {
			t.Errorf("compactDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestParseRetention(t *testing.T) {
	cfg := func(kv ...string) []kadm.Config {
		var out []kadm.Config
		for i := 0; i < len(kv); i += 2 {
			out = append(out, kadm.Config{Key: kv[i], Value: kadm.StringPtr(kv[i+1])})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		configs []kadm.Config
		want    topicRetention
	}{
		{"defaults", nil, topicRetention{Delete: true, Ms: 604800000, Bytes: -1}},
		{"set", cfg("cleanup.policy", "delete", "retention.ms", "3600000", "retention.bytes", "1000"),
			topicRetention{Delete: true, Ms: 3600000, Bytes: 1000}},
		{"compact only", cfg("cleanup.policy", "compact"), topicRetention{Delete: false, Ms: 604800000, Bytes: -1}},
		{"compact and delete", cfg("cleanup.policy", "compact, delete", "retention.ms", "-1"),
			topicRetention{Delete: true, Ms: -1, Bytes: -1}},
		{"unparsable keeps the default", cfg("retention.ms", "soon"), topicRetention{Delete: true, Ms: 604800000, Bytes: -1}},
	} {
		if got := parseRetention(tc.configs); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

var lagNow = time.UnixMilli(1_800_000_000_000)

// lagFixture is one partition of each case lagRows distinguishes, with the
// topic configs and record timestamps a gather would have read.
func lagFixture() ([]groupPartition, map[string]topicRetention, map[stampKey]int64) {
	gp := func(group, topic string, committed, logStart, end int64) groupPartition {
		return groupPartition{Group: group, Topic: topic, Committed: committed, LogStart: logStart, End: end, KadmLag: end - max(committed, logStart)}
	}
	noCommit := gp("g", "hour", -1, 0, 100)
	noCommit.KadmLag = 100
	failed := gp("g", "gone", 5, 0, 0)
	failed.KadmLag, failed.Err = -1, errors.New("UNKNOWN_TOPIC_OR_PARTITION")
	parts := []groupPartition{
		gp("g", "hour", 40, 0, 100),       // behind: 60 records, record 2m old, 58m left
		gp("caught", "hour", 100, 0, 100), // caught up: the next record's full retention.ms
		gp("late", "hour", 10, 50, 100),   // below the log start: lost
		gp("g", "forever", 0, 0, 10),      // retention.ms and retention.bytes -1
		gp("g", "compacted", 0, 0, 10),    // cleanup.policy=compact
		gp("g", "sized", 0, 0, 10),        // retention.bytes only
		gp("late", "sized", 3, 5, 10),     // retention.bytes only, below the log start
		gp("g", "both", 0, 0, 10),         // retention.ms and retention.bytes: the size rule is left out
		gp("g", "unread", 0, 0, 10),       // the record at the committed offset did not arrive
		gp("g", "unconfigured", 0, 0, 10), // configs not read
		noCommit,
		failed,
	}
	retention := map[string]topicRetention{
		"hour":      {Delete: true, Ms: 3_600_000, Bytes: -1},
		"forever":   {Delete: true, Ms: -1, Bytes: -1},
		"compacted": {Delete: false, Ms: 3_600_000, Bytes: -1},
		"sized":     {Delete: true, Ms: -1, Bytes: 1000},
		"both":      {Delete: true, Ms: 3_600_000, Bytes: 1},
		"unread":    {Delete: true, Ms: 3_600_000, Bytes: -1},
		"gone":      {Delete: true, Ms: 3_600_000, Bytes: -1},
	}
	at := func(topic string, offset int64, age time.Duration) (stampKey, int64) {
		return stampKey{topicPartition{topic, 0}, offset}, lagNow.Add(-age).UnixMilli()
	}
	stamps := map[stampKey]int64{}
	for _, s := range []struct {
		topic  string
		offset int64
		age    time.Duration
	}{
		{"hour", 40, 2 * time.Minute},
		{"hour", 50, 30 * time.Minute}, // the log start, read for the lost group
		{"forever", 0, 90 * time.Second},
		{"compacted", 0, 3 * time.Hour},
		{"sized", 0, time.Second},
		{"sized", 5, time.Second},
		{"both", 0, 10 * time.Minute},
		{"unconfigured", 0, 50 * time.Hour},
	} {
		k, v := at(s.topic, s.offset, s.age)
		stamps[k] = v
	}
	return parts, retention, stamps
}

// TestLagRows: records and time behind and the retention margin of each
// case, as the table and JSON print them.
func TestLagRows(t *testing.T) {
	parts, retention, stamps := lagFixture()
	rows := lagRows(parts, retention, stamps, lagNow)
	want := []struct {
		group, topic, committed, end, lag, lagTime, retention string
	}{
		{"g", "hour", "40", "100", "60", "2m0s", "loses data in 58m0s"},
		{"caught", "hour", "100", "100", "0", "-", "loses data in 1h0m"},
		{"late", "hour", "10", "100", "90", "30m0s", "LOST (offset below log start 50)"},
		{"g", "forever", "0", "10", "10", "1m30s", "-"},
		{"g", "compacted", "0", "10", "10", "3h0m", "-"},
		{"g", "sized", "0", "10", "10", "1s", "size-limited"},
		{"late", "sized", "3", "10", "7", "1s", "LOST (offset below log start 5)"},
		{"g", "both", "0", "10", "10", "10m0s", "loses data in 50m0s"},
		{"g", "unread", "0", "10", "10", "?", "?"},
		{"g", "unconfigured", "0", "10", "10", "2d2h", "?"},
		{"g", "hour", "-", "100", "100", "-", "-"},
		{"g", "gone", "5", "?", "?", "?", "?"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		end, records := r.endAndLag()
		got := []string{r.Group, r.Topic, r.committedText(), end, records, r.lagTime(), r.Margin.String()}
		if exp := []string{w.group, w.topic, w.committed, w.end, w.lag, w.lagTime, w.retention}; !slices.Equal(got, exp) {
			t.Errorf("row %d: %q, want %q", i, got, exp)
		}
	}
}

// TestLagJSON: nulls for what is unknown or unlimited, 0 and lost for a
// lost partition, the error of a failed one.
func TestLagJSON(t *testing.T) {
	parts, retention, stamps := lagFixture()
	var buf bytes.Buffer
	if err := printLagJSON(&buf, lagRows(parts, retention, stamps, lagNow)); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	check := func(i int, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if got[i][k] != v {
				t.Errorf("row %d: %s = %#v, want %#v\n%v", i, k, got[i][k], v, got[i])
			}
		}
	}
	check(0, map[string]any{"group": "g", "topic": "hour", "partition": 0.0, "committed": 40.0, "end": 100.0,
		"log_start": 0.0, "lag": 60.0, "lag_seconds": 120.0, "retention_margin_seconds": 3480.0, "lost": false})
	check(1, map[string]any{"lag": 0.0, "lag_seconds": 0.0, "retention_margin_seconds": 3600.0})
	check(2, map[string]any{"lost": true, "retention_margin_seconds": 0.0, "log_start": 50.0})
	check(3, map[string]any{"retention_margin_seconds": nil, "lost": false, "retention": "-"})
	check(5, map[string]any{"retention_margin_seconds": nil, "retention": "size-limited"})
	check(8, map[string]any{"lag_seconds": nil, "retention_margin_seconds": nil, "retention": "?"})
	check(10, map[string]any{"committed": nil, "lag_seconds": nil, "lag": 100.0})
	check(11, map[string]any{"error": "UNKNOWN_TOPIC_OR_PARTITION"})
	if _, ok := got[0]["error"]; ok {
		t.Errorf("row 0 has an error field: %v", got[0])
	}

	buf.Reset()
	if err := printLagJSON(&buf, nil); err != nil || strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("no rows: %q %v, want []", buf.String(), err)
	}
}

func TestLagTable(t *testing.T) {
	parts, retention, stamps := lagFixture()
	var buf bytes.Buffer
	if err := printLagTable(&buf, lagRows(parts, retention, stamps, lagNow)[:3]); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^GROUP\s+TOPIC\s+PARTITION\s+COMMITTED\s+END\s+LAG\s+LAG-TIME\s+RETENTION$`,
		`(?m)^g\s+hour\s+0\s+40\s+100\s+60\s+2m0s\s+loses data in 58m0s$`,
		`(?m)^late\s+hour\s+0\s+10\s+100\s+90\s+30m0s\s+LOST \(offset below log start 50\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(buf.String()) {
			t.Errorf("table does not match %s:\n%s", re, buf.String())
		}
	}
}

// TestMostUrgent: LOST beats any time, the least time beats more, a known
// time beats unknown, which beats size-limited and no limit.
func TestMostUrgent(t *testing.T) {
	row := func(group string, m retentionMargin) lagRow {
		return lagRow{groupPartition: groupPartition{Group: group}, Margin: m}
	}
	lost := retentionMargin{Kind: retentionLost, LogStart: 9}
	soon := retentionMargin{Kind: retentionTime, Seconds: 60}
	later := retentionMargin{Kind: retentionTime, Seconds: 7200}
	unknown := retentionMargin{Kind: retentionUnknown}
	size := retentionMargin{Kind: retentionSize}
	none := retentionMargin{Kind: retentionNone}
	got := mostUrgent([]lagRow{
		row("a", later), row("a", lost), row("a", soon),
		row("b", none), row("b", later), row("b", soon), row("b", unknown),
		row("c", none), row("c", size), row("c", unknown),
		row("d", none), row("d", size),
		row("e", none),
	})
	want := map[string]string{"a": "LOST", "b": "loses data in 1m0s", "c": "?", "d": "size-limited", "e": "-"}
	for g, w := range want {
		if s := got[g].summary(); s != w {
			t.Errorf("group %s: %q, want %q", g, s, w)
		}
	}
}

// TestStampWants: one read per distinct offset of a partition, ascending;
// a lost group reads at the log start; caught-up, uncommitted and failed
// partitions read nothing.
func TestStampWants(t *testing.T) {
	parts := []groupPartition{
		{Group: "a", Topic: "t", Committed: 70, LogStart: 20, End: 100},
		{Group: "b", Topic: "t", Committed: 30, LogStart: 20, End: 100},
		{Group: "c", Topic: "t", Committed: 30, LogStart: 20, End: 100},
		{Group: "d", Topic: "t", Committed: 5, LogStart: 20, End: 100},
		{Group: "e", Topic: "t", Committed: 100, LogStart: 20, End: 100},
		{Group: "f", Topic: "t", Committed: -1, LogStart: 20, End: 100},
		{Group: "g", Topic: "t", Partition: 1, Committed: 3, End: 9, Err: errors.New("x")},
		{Group: "h", Topic: "u", Committed: 1, LogStart: 4, End: 4}, // lost, and the log is empty
	}
	got := stampWants(parts)
	want := map[topicPartition][]int64{{"t", 0}: {20, 30, 70}}
	if len(got) != len(want) || !slices.Equal(got[topicPartition{"t", 0}], want[topicPartition{"t", 0}]) {
		t.Errorf("stampWants = %v, want %v", got, want)
	}
}

// TestResolveStamps: each pending offset takes the first record at or
// after it; records below (buffered before a jump) answer nothing.
func TestResolveStamps(t *testing.T) {
	tp := topicPartition{"t", 0}
	rec := func(off int64) *kgo.Record { return &kgo.Record{Offset: off, Timestamp: time.UnixMilli(1000 + off)} }
	stamps := map[stampKey]int64{}
	rest := resolveStamps(tp, []int64{5, 7, 9, 20}, []*kgo.Record{rec(3), rec(4), rec(6), rec(9), rec(10)}, stamps)
	if !slices.Equal(rest, []int64{20}) {
		t.Errorf("pending %v, want [20]", rest)
	}
	want := map[stampKey]int64{{tp, 5}: 1006, {tp, 7}: 1009, {tp, 9}: 1009}
	if !maps.Equal(stamps, want) {
		t.Errorf("stamps %v, want %v", stamps, want)
	}
}

// TestPrintGroupLagRetention: describe's RETENTION column takes the row of
// each partition, "?" for one the rows lack.
func TestPrintGroupLagRetention(t *testing.T) {
	l := kadm.DescribedGroupLag{Group: "g", State: "Empty", Lag: kadm.GroupLag{"t": {
		0: {Topic: "t", Partition: 0, Commit: kadm.Offset{At: 40}, End: kadm.ListedOffset{Offset: 100}, Lag: 60},
		1: {Topic: "t", Partition: 1, Commit: kadm.Offset{At: 5}, End: kadm.ListedOffset{Offset: 9}, Lag: 4},
	}}}
	rows := indexLagRows([]lagRow{{
		groupPartition: groupPartition{Group: "g", Topic: "t", Partition: 0},
		Margin:         retentionMargin{Kind: retentionTime, Seconds: 3*3600 + 5},
	}})
	var buf bytes.Buffer
	if err := printGroupLag(&buf, l, rows); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^\s+TOPIC\s+PARTITION\s+COMMITTED\s+END\s+LAG\s+MEMBER\s+CLIENT-ID\s+HOST\s+RETENTION$`,
		`(?m)^\s+t\s+0\s+40\s+100\s+60\s+-\s+-\s+-\s+loses data in 3h0m$`,
		`(?m)^\s+t\s+1\s+5\s+9\s+4\s+-\s+-\s+-\s+\?$`,
	} {
		if !regexp.MustCompile(re).MatchString(buf.String()) {
			t.Errorf("describe does not match %s:\n%s", re, buf.String())
		}
	}
}
