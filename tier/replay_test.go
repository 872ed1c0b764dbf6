package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/tier/objstore"
)

// replayObj is an object claiming [keyBase, last] (footer base base).
func replayObj(name string, keyBase, base, last int64, epoch int32, age int) ReplayObject {
	return ReplayObject{Key: name, KeyBase: keyBase, ModTime: time.Unix(1000-int64(age), 0),
		Footer: &Footer{BaseOffset: base, LastOffset: last, UploadEpoch: epoch}}
}

func planString(pieces []ReplayPiece) string {
	var parts []string
	for _, p := range pieces {
		parts = append(parts, fmt.Sprintf("%s[%d,%d]", p.Object.Key, p.From, p.To))
	}
	return strings.Join(parts, " ")
}

func TestPlanReplay(t *testing.T) {
	cases := []struct {
		name string
		objs []ReplayObject
		want string
	}{
		{"contiguous", []ReplayObject{replayObj("a", 0, 0, 9, 1, 5), replayObj("b", 10, 10, 19, 1, 4)}, "a[0,9] b[10,19]"},
		{"retried upload, same epoch: newest wins", []ReplayObject{replayObj("a", 0, 0, 9, 1, 5), replayObj("a2", 0, 0, 9, 1, 1)},
			"a2[0,9]"},
		{"higher epoch wins over newer", []ReplayObject{replayObj("a", 0, 0, 14, 2, 5), replayObj("b", 10, 10, 19, 1, 1)},
			"a[0,14] b[15,19]"},
		{"compaction output claims from its key base", []ReplayObject{replayObj("a", 0, 0, 9, 1, 9),
			replayObj("b", 10, 10, 19, 1, 8), replayObj("c", 0, 4, 17, 1, 2), replayObj("d", 20, 20, 29, 1, 1)},
			"c[0,17] b[18,19] d[20,29]"},
		{"inside a better object", []ReplayObject{replayObj("a", 0, 0, 29, 1, 5), replayObj("b", 10, 10, 19, 1, 9)},
			"a[0,29]"},
		{"better object inside", []ReplayObject{replayObj("a", 0, 0, 29, 1, 9), replayObj("b", 10, 10, 19, 1, 5)},
			"a[0,9] b[10,19] a[20,29]"},
		{"gap stays a gap", []ReplayObject{replayObj("a", 0, 0, 9, 1, 9), replayObj("b", 20, 20, 29, 1, 5)},
			"a[0,9] b[20,29]"},
	}
	for _, tc := range cases {
		if got := planString(PlanReplay(tc.objs)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// timedObj is replayObj with the footer's first and max timestamps.
func timedObj(name string, base, last int64, epoch int32, age int, firstTS, maxTS int64) ReplayObject {
	o := replayObj(name, base, base, last, epoch, age)
	o.Footer.FirstTimestamp, o.Footer.MaxTimestamp = firstTS, maxTS
	return o
}

func TestReplayPlanExtent(t *testing.T) {
	cases := []struct {
		name string
		objs []ReplayObject
		want ReplayExtent
	}{
		{"contiguous", []ReplayObject{timedObj("a", 0, 9, 1, 5, 100, 190), timedObj("b", 10, 19, 1, 4, 200, 290)},
			ReplayExtent{First: 0, Last: 19, FirstTime: 100, LastTime: 290}},
		{"retention: starts late, holes named", []ReplayObject{timedObj("a", 50, 59, 1, 9, 500, 590),
			timedObj("b", 70, 79, 1, 8, 700, 790), timedObj("c", 81, 89, 1, 7, 810, 890)},
			ReplayExtent{First: 50, Last: 89, FirstTime: 500, LastTime: 890, Holes: [][2]int64{{60, 69}, {80, 80}}}},
		{"the end's time is its serving object's", []ReplayObject{timedObj("a", 0, 29, 2, 9, 100, 390),
			timedObj("b", 10, 19, 1, 1, 200, 999)},
			ReplayExtent{First: 0, Last: 29, FirstTime: 100, LastTime: 390}},
		{"a better object inside another", []ReplayObject{timedObj("a", 0, 29, 1, 9, 100, 390),
			timedObj("b", 25, 35, 1, 1, 350, 450)},
			ReplayExtent{First: 0, Last: 35, FirstTime: 100, LastTime: 450}},
	}
	for _, tc := range cases {
		got, ok := PlanExtent(PlanReplay(tc.objs))
		if !ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := PlanExtent(nil); ok {
		t.Error("an empty plan has an extent")
	}
}

func TestReplayAllPartitionIDs(t *testing.T) {
	objs := []ReplayObject{replayObj("a", 0, 0, 9, 1, 1)}
	cases := []struct {
		name  string
		parts []int32 // partitions with objects
		file  *TopicFile
		want  []int32
	}{
		{"no topic.json: only partitions with objects", []int32{1, 3}, nil, []int32{1, 3}},
		{"topic.json's count", []int32{1}, &TopicFile{Partitions: 4}, []int32{0, 1, 2, 3}},
		{"objects past topic.json's count", []int32{0, 5}, &TopicFile{Partitions: 2}, []int32{0, 1, 2, 3, 4, 5}},
		{"topic.json, no objects", nil, &TopicFile{Partitions: 2}, []int32{0, 1}},
	}
	for _, tc := range cases {
		rt := &ReplayTopic{Partitions: map[int32][]ReplayObject{}, File: tc.file}
		for _, p := range tc.parts {
			rt.Partitions[p] = objs
		}
		if got := rt.AllPartitionIDs(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReplayTopicFile: FindReplayTopic reads the incarnation's topic.json
// when the bucket has one, and names a damaged one instead of failing.
func TestReplayTopicFile(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemStore()
	putRestoreObject(t, store, testTopicID, 1, []rBatch{{base: 0, epoch: 1, stamps: stamps(1000, 3)}}, 0)
	if rt := findRestoreTopic(t, store, testTopicID); rt.File != nil || rt.FileErr != nil {
		t.Fatalf("no topic.json: %+v, %v", rt.File, rt.FileErr)
	}
	file, err := EncodeTopicFile(TopicFile{Topic: restoreTopic, TopicID: testTopicID.String(), Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	key := TopicConfigKey("c1", restoreTopic, testTopicID)
	if err := store.Put(ctx, key, bytes.NewReader(file), int64(len(file))); err != nil {
		t.Fatal(err)
	}
	if rt := findRestoreTopic(t, store, testTopicID); rt.File == nil || rt.File.Partitions != 3 ||
		!slices.Equal(rt.AllPartitionIDs(), []int32{0, 1, 2}) {
		t.Fatalf("topic.json: %+v, %v", rt.File, rt.FileErr)
	}
	if err := store.Put(ctx, key, bytes.NewReader([]byte("{")), 1); err != nil {
		t.Fatal(err)
	}
	if rt := findRestoreTopic(t, store, testTopicID); rt.File != nil || !errors.Is(rt.FileErr, ErrCorruptObject) ||
		!slices.Equal(rt.AllPartitionIDs(), []int32{0}) {
		t.Fatalf("damaged topic.json: %+v, %v", rt.File, rt.FileErr)
	}
}
