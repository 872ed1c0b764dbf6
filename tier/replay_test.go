package tier

import (
	"fmt"
	"strings"
	"testing"
	"time"
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
