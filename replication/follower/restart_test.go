package follower

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/hotlog"
)

// resetLog is an in-memory Log twin recording restarts; it rejects
// snapshots when reject is set, as hotlog does a malformed one.
type resetLog struct {
	Log           // unused methods panic (nil)
	reject        bool
	resets        []int64
	snapshotReset []int64
}

func (l *resetLog) ResetTo(offset int64) error {
	l.resets = append(l.resets, offset)
	return nil
}

func (l *resetLog) ResetToWithProducerSnapshot(offset int64, snap []byte) error {
	if l.reject {
		return fmt.Errorf("%w: test", hotlog.ErrBadProducerSnapshot)
	}
	l.snapshotReset = append(l.snapshotReset, offset)
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
