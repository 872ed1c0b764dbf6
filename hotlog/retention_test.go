package hotlog

import (
	"errors"
	"testing"
	"time"
)

func TestRetentionByTimeAndSegmentMs(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_000_000)}
	cfg := testConfig(t, t.TempDir())
	cfg.Now, cfg.RetentionMs, cfg.SegmentMs = clock.Now, time.Hour, 10*time.Minute
	l := mustOpen(t, cfg)
	defer l.Close()
	// Two segments of old data (timestamps ~1000s), then a roll by segment.ms.
	fillLog(t, l, 40)
	clock.Advance(11 * time.Minute)
	res := mustAppend(t, l, simpleBatch(t, 1, clock.Now().UnixMilli(), 10), 1)
	stats := l.Stats()
	if l.Stats().Segments < 3 {
		t.Fatalf("%d segments", stats.Segments)
	}
	if n, err := l.ApplyRetention(clock.Now()); err != nil || n != 0 {
		t.Fatalf("nothing is an hour old yet: %d %v", n, err)
	}
	clock.Advance(2 * time.Hour)
	n, err := l.ApplyRetention(clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The old segments go; the one with the new batch was rolled by
	// segment.ms and goes too (its max timestamp is 2h old); a fresh active stays.
	if n != stats.Segments || l.Stats().Segments != 1 {
		t.Fatalf("deleted %d of %d, %d left", n, stats.Segments, l.Stats().Segments)
	}
	if l.LogStartOffset() != res.LastOffset+1 || l.LogEndOffset() != res.LastOffset+1 {
		t.Fatalf("start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if _, err := l.Read(0, 100, 1000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	l.Close()
	l = mustOpen(t, cfg)
	if l.LogStartOffset() != res.LastOffset+1 {
		t.Fatalf("start offset not checkpointed: %d", l.LogStartOffset())
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionMs = -1
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 100)
	segs := l.Stats().Segments
	segSize := l.mu.segments[0].size
	if err := l.Reconfigure(Config{Dir: cfg.Dir, SegmentBytes: cfg.SegmentBytes, IndexIntervalBytes: 256,
		RetentionMs: -1, RetentionBytes: 3 * segSize}); err != nil {
		t.Fatal(err)
	}
	n, err := l.ApplyRetention(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's rule: delete while size - segmentSize >= retention.bytes.
	if n == 0 || l.Size() < 3*segSize-segSize || l.Size()-l.mu.segments[0].size >= 3*segSize {
		t.Fatalf("deleted %d of %d, size %d", n, segs, l.Size())
	}
	if l.LogStartOffset() != l.mu.segments[0].base {
		t.Fatalf("start %d, first segment %d", l.LogStartOffset(), l.mu.segments[0].base)
	}
	if hs := readAll(t, l, l.LogStartOffset()); hs[len(hs)-1].LastOffset() != 299 {
		t.Fatal("tail lost")
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	l := mustOpen(t, cfg)
	defer l.Close()
	fillLog(t, l, 100)
	before := l.Stats().Segments
	if err := l.DeleteRecordsBefore(301); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past LEO: %v", err)
	}
	if err := l.DeleteRecordsBefore(100); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 100 || l.Stats().Segments >= before {
		t.Fatalf("start %d, segments %d of %d", l.LogStartOffset(), l.Stats().Segments, before)
	}
	if _, err := l.Read(99, 100, 300); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below start: %v", err)
	}
	if b, err := l.Read(100, 1, 300); err != nil || len(b) == 0 {
		t.Fatalf("at start: %v", err)
	}
	if err := l.DeleteRecordsBefore(50); err != nil || l.LogStartOffset() != 100 {
		t.Fatalf("moved down: %v %d", err, l.LogStartOffset())
	}
	if err := l.DeleteRecordsBefore(300); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 300 || l.Stats().Segments != 1 || l.Size() != 0 {
		t.Fatalf("everything deleted: start %d segs %d size %d", l.LogStartOffset(), l.Stats().Segments, l.Size())
	}
	if res := mustAppend(t, l, simpleBatch(t, 1, 1, 1), 1); res.BaseOffset != 300 {
		t.Fatalf("append at %d", res.BaseOffset)
	}
}

func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	if l.LatestEpoch() != -1 {
		t.Fatal("empty log has an epoch")
	}
	if e, o := l.EndOffsetForEpoch(0); e != -1 || o != -1 {
		t.Fatalf("empty: %d %d", e, o)
	}
	mustAppend(t, l, simpleBatch(t, 5, 1, 1), 2) // 0-4 epoch 2
	mustAppend(t, l, simpleBatch(t, 5, 1, 1), 2) // 5-9
	mustAppend(t, l, simpleBatch(t, 5, 1, 1), 4) // 10-14 epoch 4
	mustAppend(t, l, simpleBatch(t, 5, 1, 1), 7) // 15-19 epoch 7
	mustAppend(t, l, simpleBatch(t, 5, 1, 1), 7) // 20-24
	tests := []struct {
		epoch, wantEpoch int32
		want             int64
	}{
		{7, 7, 25}, {6, 4, 15}, {4, 4, 15}, {3, 2, 10}, {2, 2, 10}, {1, 1, 0}, {8, -1, -1},
	}
	check := func(l *Log) {
		t.Helper()
		for _, tc := range tests {
			if e, o := l.EndOffsetForEpoch(tc.epoch); e != tc.wantEpoch || o != tc.want {
				t.Fatalf("EndOffsetForEpoch(%d) = %d,%d want %d,%d", tc.epoch, e, o, tc.wantEpoch, tc.want)
			}
		}
	}
	check(l)
	l.Close()
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	check(l)
	if err := l.Truncate(12); err != nil { // inside 10-14: the whole batch goes
		t.Fatal(err)
	}
	if l.LogEndOffset() != 10 || l.LatestEpoch() != 2 {
		t.Fatalf("after truncate LEO %d epoch %d", l.LogEndOffset(), l.LatestEpoch())
	}
	if e, o := l.EndOffsetForEpoch(2); e != 2 || o != 10 {
		t.Fatalf("epoch 2 after truncate: %d %d", e, o)
	}
	if res := mustAppend(t, l, simpleBatch(t, 2, 1, 1), 9); res.BaseOffset != 10 || l.LatestEpoch() != 9 {
		t.Fatalf("append after truncate at %d", res.BaseOffset)
	}
	if hs := readAll(t, l, 0); len(hs) != 3 || hs[2].PartitionLeaderEpoch != 9 {
		t.Fatalf("%d batches", len(hs))
	}
}

func TestTruncateAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillLog(t, l, 100)
	before := len(segmentFiles(t, dir))
	if err := l.Truncate(30); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 30 || l.FlushedOffset() > 30 || len(segmentFiles(t, dir)) >= before {
		t.Fatalf("LEO %d flushed %d", l.LogEndOffset(), l.FlushedOffset())
	}
	fillFrom := mustAppend(t, l, simpleBatch(t, 3, 1, 100), 1)
	if fillFrom.BaseOffset != 30 {
		t.Fatalf("append at %d", fillFrom.BaseOffset)
	}
	crash(t, l)
	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	if hs := readAll(t, l, 0); len(hs) != 11 || l.LogEndOffset() != 33 {
		t.Fatalf("%d batches, LEO %d", len(hs), l.LogEndOffset())
	}
}

func TestAppendReplicatedKeepsOffsetsAndEpochs(t *testing.T) {
	leader := mustOpen(t, testConfig(t, t.TempDir()))
	defer leader.Close()
	mustAppend(t, leader, simpleBatch(t, 3, 1, 10), 1)
	mustAppend(t, leader, simpleBatch(t, 2, 1, 10), 4)
	data, err := leader.Read(0, 1<<20, leader.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	follower := mustOpen(t, testConfig(t, t.TempDir()))
	defer follower.Close()
	res, err := follower.AppendReplicated(append([]byte(nil), data...))
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	got, err := follower.Read(0, 1<<20, follower.LogEndOffset())
	if err != nil || string(got) != string(data) {
		t.Fatalf("replica differs: %v", err)
	}
	if e, o := follower.EndOffsetForEpoch(1); e != 1 || o != 3 || follower.LatestEpoch() != 4 {
		t.Fatalf("epochs: %d %d latest %d", e, o, follower.LatestEpoch())
	}
	if _, err := follower.AppendReplicated(append([]byte(nil), data...)); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("overlapping replicated append: %v", err)
	}
}
