package follower

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// resetLog is an in-memory Log twin recording restarts; it rejects
// snapshots when reject is set, as hotlog does a malformed one.
type resetLog struct {
	Log           // unused methods panic (nil)
	reject        bool
	end           int64 // LogEndOffset; restarts move it
	resets        []int64
	snapshotReset []int64
}

func (l *resetLog) LogEndOffset() int64 { return l.end }

func (l *resetLog) ResetTo(offset int64) error {
	l.resets, l.end = append(l.resets, offset), offset
	return nil
}

func (l *resetLog) ResetToWithProducerSnapshot(offset int64, snap []byte) error {
	if l.reject {
		return fmt.Errorf("%w: test", hotlog.ErrBadProducerSnapshot)
	}
	l.snapshotReset, l.end = append(l.snapshotReset, offset), offset
	return nil
}

func TestRestartLogFallsBackToEmptyProducerState(t *testing.T) {
	cases := []struct {
		name             string
		snap             []byte
		reject           bool
		resets, withSnap int
	}{
		{"no snapshot", nil, false, 1, 0},
		{"snapshot installed", []byte{1}, false, 0, 1},
		{"snapshot rejected", []byte{1}, true, 1, 0},
	}
	for _, c := range cases {
		l := &resetLog{reject: c.reject}
		if err := RestartLog(discardLogger, l, "t", 0, 600, c.snap, "test"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(l.resets) != c.resets || len(l.snapshotReset) != c.withSnap {
			t.Errorf("%s: %d empty and %d snapshot restarts, want %d and %d", c.name, len(l.resets), len(l.snapshotReset), c.resets, c.withSnap)
		}
	}
}

func TestRestartSnapshotReadsAtTheNewStart(t *testing.T) {
	ctx := context.Background()
	if snap := RestartSnapshot(ctx, discardLogger, nil, "t", 0, 600, "test"); snap != nil {
		t.Fatal("a snapshot without a source")
	}
	var asked int64
	read := func(_ context.Context, offset int64) ([]byte, error) {
		asked = offset
		return []byte("state"), nil
	}
	if snap := RestartSnapshot(ctx, discardLogger, read, "t", 0, 600, "test"); string(snap) != "state" || asked != 600 {
		t.Fatalf("snapshot %q read at %d, want \"state\" at 600", snap, asked)
	}
	failing := func(context.Context, int64) ([]byte, error) { return nil, errors.New("none") }
	if snap := RestartSnapshot(ctx, discardLogger, failing, "t", 0, 600, "test"); snap != nil {
		t.Fatal("a snapshot from a failed read")
	}
}

// resetPartition is a Partition over a resetLog.
type resetPartition struct{ l *resetLog }

func (p resetPartition) Topic() string             { return "t" }
func (p resetPartition) TopicID() metadata.TopicID { return metadata.TopicID{1} }
func (p resetPartition) Index() int32              { return 0 }
func (p resetPartition) Log() Log                  { return p.l }

// snapshotsAt serves a producer snapshot only at offset at.
type snapshotsAt struct {
	at    int64
	asked []int64
}

func (s *snapshotsAt) ProducerSnapshot(_ context.Context, _ Partition, offset int64) ([]byte, error) {
	s.asked = append(s.asked, offset)
	if offset != s.at {
		return nil, errors.New("no object ends there")
	}
	return []byte("state"), nil
}

// tieredEndAt is a TieredEnd whose tiered history ends at end.
func tieredEndAt(end *int64) TieredEnd {
	return func(logEnd int64) (int64, bool) { return *end, logEnd < *end }
}

func TestLeaderRestartsItsLogAtTheTieredEnd(t *testing.T) {
	ctx := context.Background()
	tiered := int64(600)
	cases := []struct {
		name           string
		logEnd, moveTo int64 // moveTo: the tiered end when the restart runs (0: unmoved)
		want           int64 // the log end after; == logEnd: no restart
		withSnap       bool
	}{
		{"log at the tiered end", 600, 0, 600, false},
		{"log past the tiered end", 900, 0, 900, false},
		{"empty log", 0, 0, 600, true},
		{"tiered end moved between prepare and restart", 0, 700, 700, false},
	}
	for _, c := range cases {
		tiered = 600
		l := &resetLog{end: c.logEnd}
		snaps := &snapshotsAt{at: 600}
		prep := PrepareLeaderRestart(ctx, discardLogger, resetPartition{l}, tieredEndAt(&tiered), snaps)
		if c.moveTo != 0 {
			tiered = c.moveTo
		}
		if err := RestartBeforeLeading(discardLogger, resetPartition{l}, tieredEndAt(&tiered), prep); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l.end != c.want || (len(l.snapshotReset) == 1) != c.withSnap {
			t.Errorf("%s: log ends at %d (want %d), snapshot restarts %v (want one: %v)", c.name, l.end, c.want, l.snapshotReset, c.withSnap)
		}
		if c.want == c.logEnd && len(snaps.asked) != 0 {
			t.Errorf("%s: the bucket was read although no restart was due", c.name)
		}
	}
}
