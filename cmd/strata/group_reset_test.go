package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestResetNewOffset: every target against one partition whose log holds
// [100, 200) and whose group committed 150; results stay in [100, 200].
func TestResetNewOffset(t *testing.T) {
	p := resetPartition{topicPartition: topicPartition{"t", 0}, Committed: 150, LogStart: 100, End: 200, AtTime: -1}
	at := func(o int64) resetPartition { q := p; q.AtTime = o; return q }
	uncommitted := p
	uncommitted.Committed = -1
	cases := []struct {
		name   string
		target resetTarget
		part   resetPartition
		want   int64
	}{
		{"earliest", resetTarget{kind: resetToEarliest}, p, 100},
		{"latest", resetTarget{kind: resetToLatest}, p, 200},
		{"offset inside", resetTarget{kind: resetToOffset, offset: 120}, p, 120},
		{"offset below log start", resetTarget{kind: resetToOffset, offset: 5}, p, 100},
		{"offset past end", resetTarget{kind: resetToOffset, offset: 999}, p, 200},
		{"offset at end", resetTarget{kind: resetToOffset, offset: 200}, p, 200},
		{"offset without commit", resetTarget{kind: resetToOffset, offset: 130}, uncommitted, 130},
		{"shift forward", resetTarget{kind: resetShiftBy, offset: 10}, p, 160},
		{"shift back", resetTarget{kind: resetShiftBy, offset: -30}, p, 120},
		{"shift zero", resetTarget{kind: resetShiftBy}, p, 150},
		{"shift below log start", resetTarget{kind: resetShiftBy, offset: -80}, p, 100},
		{"shift past end", resetTarget{kind: resetShiftBy, offset: 80}, p, 200},
		{"shift by max int64", resetTarget{kind: resetShiftBy, offset: math.MaxInt64}, p, 200},
		{"shift by min int64", resetTarget{kind: resetShiftBy, offset: math.MinInt64}, p, 100},
		{"time found", resetTarget{kind: resetToTime}, at(170), 170},
		{"time after every record", resetTarget{kind: resetToTime}, at(-1), 200},
		{"time before log start", resetTarget{kind: resetToTime}, at(50), 100},
	}
	for _, tc := range cases {
		got, err := tc.target.newOffset(tc.part)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestPlanResetShiftNeedsCommit: --shift-by of a partition without a
// committed offset fails the whole plan, naming the partition, as Kafka's
// tool does.
func TestPlanResetShiftNeedsCommit(t *testing.T) {
	parts := []resetPartition{
		{topicPartition: topicPartition{"t", 0}, Committed: 5, LogStart: 0, End: 10},
		{topicPartition: topicPartition{"t", 1}, Committed: -1, LogStart: 0, End: 10},
	}
	_, err := planReset(resetTarget{kind: resetShiftBy, offset: 1}, parts)
	if err == nil || !strings.Contains(err.Error(), "t partition 1 has no committed offset") {
		t.Fatalf("err %v, want t partition 1 named", err)
	}
	plan, err := planReset(resetTarget{kind: resetToOffset, offset: 3}, parts)
	want := []resetPlanRow{
		{topicPartition: topicPartition{"t", 0}, Current: 5, New: 3, LogStart: 0, End: 10},
		{topicPartition: topicPartition{"t", 1}, Current: -1, New: 3, LogStart: 0, End: 10},
	}
	if err != nil || !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan %+v, %v; want %+v", plan, err, want)
	}
}

func TestParseTopicSelection(t *testing.T) {
	cases := []struct {
		specs []string
		want  topicSelection
		err   string
	}{
		{[]string{"orders"}, topicSelection{"orders": {all: true}}, ""},
		{[]string{"orders:0,1"}, topicSelection{"orders": {partitions: []int32{0, 1}}}, ""},
		{[]string{"orders:2", "orders:1,2", "audit"},
			topicSelection{"orders": {partitions: []int32{1, 2}}, "audit": {all: true}}, ""},
		{[]string{"orders:0", "orders"}, topicSelection{"orders": {all: true, partitions: []int32{0}}}, ""},
		{[]string{"orders", "orders:0"}, topicSelection{"orders": {all: true, partitions: []int32{0}}}, ""},
		{[]string{"orders: 3 ,1"}, topicSelection{"orders": {partitions: []int32{1, 3}}}, ""},
		{[]string{"orders:"}, nil, "not a partition number"},
		{[]string{"orders:0,,1"}, nil, "not a partition number"},
		{[]string{"orders:-1"}, nil, "not a partition number"},
		{[]string{"orders:x"}, nil, "not a partition number"},
		{[]string{":0"}, nil, "want TOPIC"},
	}
	for _, tc := range cases {
		got, err := parseTopicSelection(tc.specs)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.specs, err, tc.err)
			}
		case err != nil || !reflect.DeepEqual(got, tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.specs, got, err, tc.want)
		}
	}
}

// TestTopicSelectionResolve: every partition of T, or the ones named; an
// unknown topic or partition is an error rather than a silent no-op.
func TestTopicSelectionResolve(t *testing.T) {
	meta := kadm.TopicDetails{
		"orders": {Topic: "orders", Partitions: kadm.PartitionDetails{0: {}, 1: {}, 2: {}}},
		"audit":  {Topic: "audit", Partitions: kadm.PartitionDetails{0: {}}},
		"gone":   {Topic: "gone", Err: kerr.UnknownTopicOrPartition},
	}
	got, err := topicSelection{"orders": {partitions: []int32{2, 0}}, "audit": {all: true}}.resolve(meta)
	want := []topicPartition{{"audit", 0}, {"orders", 0}, {"orders", 2}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	got, err = topicSelection{"orders": {all: true, partitions: []int32{1}}}.resolve(meta)
	if want := []topicPartition{{"orders", 0}, {"orders", 1}, {"orders", 2}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("all wins: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		sel  topicSelection
		want string
	}{
		{topicSelection{"orders": {partitions: []int32{3}}}, "topic orders has no partition 3"},
		{topicSelection{"gone": {all: true}}, "topic gone: UNKNOWN_TOPIC_OR_PARTITION"},
		{topicSelection{"missing": {all: true}}, "topic missing: not in the cluster's metadata"},
	} {
		if _, err := tc.sel.resolve(meta); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.sel, err, tc.want)
		}
	}
}

func TestResetFlagsTarget(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		flags resetFlags
		given []string
		want  resetTarget
		err   string
	}{
		{resetFlags{earliest: true}, []string{"to-earliest"}, resetTarget{kind: resetToEarliest}, ""},
		{resetFlags{latest: true}, []string{"to-latest"}, resetTarget{kind: resetToLatest}, ""},
		{resetFlags{toOffset: 0}, []string{"to-offset"}, resetTarget{kind: resetToOffset}, ""},
		{resetFlags{shiftBy: -5}, []string{"shift-by"}, resetTarget{kind: resetShiftBy, offset: -5}, ""},
		{resetFlags{byDuration: time.Hour}, []string{"by-duration"}, resetTarget{kind: resetToTime, at: now.Add(-time.Hour)}, ""},
		{resetFlags{datetime: "2026-02-01T00:00:00Z"}, []string{"to-datetime"},
			resetTarget{kind: resetToTime, at: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}, ""},
		{resetFlags{}, nil, resetTarget{}, "exactly one of"},
		{resetFlags{earliest: true, shiftBy: 1}, []string{"to-earliest", "shift-by"}, resetTarget{}, "exactly one of"},
		{resetFlags{toOffset: -1}, []string{"to-offset"}, resetTarget{}, "--to-offset -1"},
		{resetFlags{byDuration: -time.Hour}, []string{"by-duration"}, resetTarget{}, "positive duration"},
		{resetFlags{datetime: "yesterday"}, []string{"to-datetime"}, resetTarget{}, "RFC 3339"},
	}
	for _, tc := range cases {
		given := map[string]bool{}
		for _, g := range tc.given {
			given[g] = true
		}
		got, err := tc.flags.target(given, now)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.given, err, tc.err)
			}
		case err != nil || got.kind != tc.want.kind || got.offset != tc.want.offset || !got.at.Equal(tc.want.at):
			t.Errorf("%v: %+v, %v; want %+v", tc.given, got, err, tc.want)
		}
	}
}

// TestPrintResetPlan: the table names the group and shows "-" for no
// commit; the JSON has null there and exact numbers.
func TestPrintResetPlan(t *testing.T) {
	plan := []resetPlanRow{
		{topicPartition: topicPartition{"t", 0}, Current: 7, New: 3, LogStart: 1, End: 9},
		{topicPartition: topicPartition{"t", 1}, Current: -1, New: 9, LogStart: 0, End: 9},
	}
	var table bytes.Buffer
	if err := printResetPlan(&table, "g", plan); err != nil {
		t.Fatal(err)
	}
	want := "GROUP  TOPIC  PARTITION  CURRENT-OFFSET  NEW-OFFSET  LOG-START  END\n" +
		"g      t      0          7               3           1          9\n" +
		"g      t      1          -               9           0          9\n"
	if table.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), want)
	}
	var out bytes.Buffer
	if err := printResetPlanJSON(&out, "g", plan); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rows[0]["current_offset"] != 7.0 || rows[0]["new_offset"] != 3.0 || rows[1]["current_offset"] != nil ||
		rows[1]["group"] != "g" || rows[1]["end"] != 9.0 {
		t.Errorf("json rows %v", rows)
	}
}

// TestGroupResetUsage: flag mistakes fail before any connection.
func TestGroupResetUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "reset", "g", "--to-earliest", "--execute", "--dry-run"}, "contradict"},
		{[]string{"group", "reset", "g", "--to-earliest", "--all-topics", "--topic", "t"}, "contradict"},
		{[]string{"group", "reset", "g", "--to-earliest", "--topic", "t:x"}, "not a partition number"},
		{[]string{"group", "reset", "g", "--shift-by", "1", "--to-offset", "3"}, "exactly one of"},
		{[]string{"group", "delete"}, "at least one group"},
		{[]string{"group", "delete-offsets", "g"}, "needs --topic"},
		{[]string{"group", "delete-offsets", "g", "--topic", "t:"}, "not a partition number"},
	} {
		var out bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if code := run(context.Background(), c, tc.args); code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q; want 2 and %q", tc.args, code, out.String(), tc.want)
		}
	}
}

// TestPrintDeleteOffsets: one row per partition; a refusal is explained
// once per topic and fails the command.
func TestPrintDeleteOffsets(t *testing.T) {
	tps := []topicPartition{{"a", 0}, {"a", 1}, {"b", 0}}
	var out bytes.Buffer
	err := printDeleteOffsets(&out, "g", tps, kadm.DeleteOffsetsResponses{"a": {0: nil, 1: nil}, "b": {0: nil}})
	if err != nil || strings.Count(out.String(), "deleted") != 3 {
		t.Fatalf("all deleted: %v\n%s", err, out.String())
	}
	out.Reset()
	err = printDeleteOffsets(&out, "g", tps, kadm.DeleteOffsetsResponses{
		"a": {0: kerr.GroupSubscribedToTopic, 1: kerr.GroupSubscribedToTopic}, "b": {0: nil},
	})
	if err == nil || !strings.Contains(err.Error(), "2 of 3 partitions of group g kept their offsets") ||
		strings.Count(err.Error(), "subscribe to topic a") != 1 {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"g      a      0          not deleted: GROUP_SUBSCRIBED_TO_TOPIC", "g      b      0          deleted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
