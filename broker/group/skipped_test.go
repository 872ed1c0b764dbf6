package group

import (
	"slices"
	"testing"

	"github.com/strata-log/strata/broker/coordinator/coordtest"
)

// A commit that moves a group from below the log start to at or past it
// counts the records retention deleted before the group read them; other
// commits count nothing.
func TestSkippedRecords(t *testing.T) {
	c := testCoordinator(t)
	c.BecomeLeader(c.PartitionFor("g"), coordtest.NewMemLog())
	waitLoaded(t, c, "g")
	logStart := int64(0)
	c.SetLogStart(func(topic string, partition int32) (int64, int64, bool) {
		return logStart, 1_700_000_000_000, topic == "t" && partition == 0
	})
	commit := func(tp TopicPartition, offset int64) {
		t.Helper()
		if code := c.Commit(CommitInput{Group: "g", Generation: -1, Offsets: map[TopicPartition]Offset{tp: {Offset: offset}}}); code != 0 {
			t.Fatalf("commit %v at %d: %d", tp, offset, code)
		}
	}
	t0 := TopicPartition{"t", 0}
	commit(t0, 40) // first commit: nothing before it
	commit(t0, 60) // log start 0: nothing deleted
	logStart = 100
	commit(t0, 90)  // still below the log start: not skipped yet
	commit(t0, 250) // 90 → past 100: records 90..99 were deleted unread
	commit(t0, 300) // already past the log start
	commit(TopicPartition{"other", 0}, 500)
	commit(TopicPartition{"other", 0}, 900) // log start unknown here: not counted
	got := c.SkippedRecords()
	if want := []Skipped{{Group: "g", TopicPartition: t0, Records: 10}}; !slices.Equal(got, want) {
		t.Fatalf("skipped %+v, want %+v", got, want)
	}
	offsets := c.CommittedOffsets()
	if len(offsets) != 2 || offsets[0].Topic != "other" || offsets[0].Offset != 900 || offsets[1].Offset != 300 {
		t.Fatalf("committed offsets %+v", offsets)
	}
}
