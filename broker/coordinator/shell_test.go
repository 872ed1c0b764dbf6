package coordinator_test

import (
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/coordinator/coordtest"
)

// batch is an uncompressed RecordBatch v2 of n empty records (no CRC:
// the shell and the twin never check it).
func batch(n int) []byte {
	var body []byte
	for i := 0; i < n; i++ {
		rec := kmsg.Record{OffsetDelta: int32(i)}
		inner := rec.AppendTo(nil)[1:]
		body = binary.AppendVarint(body, int64(len(inner)))
		body = append(body, inner...)
	}
	b := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		LastOffsetDelta: int32(n - 1), NumRecords: int32(n), Records: body}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	return out
}

// keyOn is a key of partition p among 3 partitions.
func keyOn(t *testing.T, p int32) string {
	t.Helper()
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if coordinator.PartitionFor(k, 3) == p {
			return k
		}
	}
	t.Fatalf("no key on partition %d", p)
	return ""
}

func TestPartitionsStatusFollowsLeadershipAndLoad(t *testing.T) {
	ps := coordinator.NewPartitions(3)
	key := keyOn(t, 1)
	if code := ps.StatusLocked(key); code != kerr.NotCoordinator.Code {
		t.Fatalf("not led: %d", code)
	}
	part, replaced := ps.LeadLocked(1, coordtest.NewMemLog(), 4)
	if part == nil || replaced {
		t.Fatalf("lead: %v %v", part, replaced)
	}
	if code := ps.StatusLocked(key); code != kerr.CoordinatorLoadInProgress.Code || !ps.LoadingLocked() {
		t.Fatalf("loading: %d %v", code, ps.LoadingLocked())
	}
	part.Loaded = true
	if code := ps.StatusLocked(key); code != 0 || ps.LoadingLocked() {
		t.Fatalf("loaded: %d", code)
	}
	if again, _ := ps.LeadLocked(1, coordtest.NewMemLog(), 4); again != nil {
		t.Fatal("leading again at the same epoch must do nothing")
	}
	newer, replaced := ps.LeadLocked(1, coordtest.NewMemLog(), 5)
	if newer == nil || !replaced || ps.StillLedLocked(1, part) || !ps.StillLedLocked(1, newer) {
		t.Fatalf("a newer epoch replaces the partition: %v %v", newer, replaced)
	}
	ps.ResignLocked(1)
	if _, ok := ps.LookupLocked(1); ok || ps.StatusLocked(key) != kerr.NotCoordinator.Code {
		t.Fatal("resigned partition still led")
	}
	ps.CloseLocked()
	if p, _ := ps.LeadLocked(2, coordtest.NewMemLog(), 0); p != nil || !ps.ClosedLocked() {
		t.Fatal("closed partitions lead nothing")
	}
}

func TestPartitionsCountChangesOnlyWhileNothingLed(t *testing.T) {
	ps := coordinator.NewPartitions(50)
	if !ps.AdoptCountLocked(0) || ps.Count() != 50 {
		t.Fatal("a count below 1 is ignored")
	}
	if !ps.AdoptCountLocked(3) || ps.Count() != 3 {
		t.Fatalf("adopt: %d", ps.Count())
	}
	ps.LeadLocked(0, coordtest.NewMemLog(), 0)
	if ps.AdoptCountLocked(7) || ps.Count() != 3 {
		t.Fatalf("changed while led: %d", ps.Count())
	}
	if !ps.AdoptCountLocked(3) {
		t.Fatal("the same count is no change")
	}
	if ps.PartitionFor("my-group") != coordinator.PartitionFor("my-group", 3) {
		t.Fatal("keys map over the adopted count")
	}
}

func TestAppendThenWaitForHighWatermark(t *testing.T) {
	ps := coordinator.NewPartitions(3)
	if _, err := ps.AppendLocked(0, batch(1), 1); !errors.Is(err, coordinator.ErrNotLed) {
		t.Fatalf("append to a partition not led: %v", err)
	}
	log := coordtest.NewMemLog()
	ps.LeadLocked(0, log, 0)
	first, err := ps.AppendLocked(0, batch(2), 2)
	if err != nil || first.Base != 0 || first.Count != 2 {
		t.Fatalf("first: %+v %v", first, err)
	}
	log.HoldHW()
	second, err := ps.AppendLocked(0, batch(3), 3)
	if err != nil || second.Base != 2 {
		t.Fatalf("second: %+v %v", second, err)
	}
	if err := first.Wait(context.Background()); err != nil {
		t.Fatalf("first is durable: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := second.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second waits for the high watermark: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- second.Wait(context.Background()) }()
	log.Release()
	if err := <-done; err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := (coordinator.Appended{}).Wait(context.Background()); !errors.Is(err, coordinator.ErrNotAppended) {
		t.Fatalf("a failed append: %v", err)
	}
	refused := errors.New("fenced")
	log.FailAppends(refused)
	if _, err := ps.AppendLocked(0, batch(1), 1); !errors.Is(err, refused) {
		t.Fatalf("the log's error: %v", err)
	}
}

func TestSplitByPartitionKeepsMachineOrder(t *testing.T) {
	type rec struct {
		partition int32
		n         int
	}
	in := []rec{{2, 0}, {0, 1}, {2, 2}, {1, 3}, {0, 4}}
	got := coordinator.SplitByPartition(in, func(r rec) int32 { return r.partition })
	want := []coordinator.Batch[rec]{
		{Partition: 2, Records: []rec{{2, 0}, {2, 2}}},
		{Partition: 0, Records: []rec{{0, 1}, {0, 4}}},
		{Partition: 1, Records: []rec{{1, 3}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if coordinator.SplitByPartition[rec](nil, nil) != nil {
		t.Fatal("no records: no batches")
	}
}

// lastOffset is the offset after the last whole batch of a read.
func lastOffset(data []byte) int64 {
	next := int64(-1)
	for len(data) >= 12 {
		size := int(binary.BigEndian.Uint32(data[8:12])) + 12
		next = int64(binary.BigEndian.Uint64(data[0:8])) + int64(binary.BigEndian.Uint32(data[23:27])) + 1
		data = data[size:]
	}
	return next
}

func TestReplayReadsToTheHighWatermark(t *testing.T) {
	log := coordtest.NewMemLog()
	for _, n := range []int{2, 1, 3} {
		if _, err := log.Append(batch(n)); err != nil {
			t.Fatal(err)
		}
	}
	log.HoldHW()
	if _, err := log.Append(batch(4)); err != nil { // not durable: not replayed
		t.Fatal(err)
	}
	var reads int
	offset, err := coordinator.Replay(log, func(data []byte) (int64, error) {
		reads++
		return lastOffset(data), nil
	})
	if err != nil || offset != 6 || reads != 1 {
		t.Fatalf("replay: offset %d reads %d err %v", offset, reads, err)
	}

	boom := errors.New("corrupt")
	if _, err := coordinator.Replay(log, func([]byte) (int64, error) { return -1, boom }); !errors.Is(err, boom) {
		t.Fatalf("apply's error: %v", err)
	}
	if off, err := coordinator.Replay(log, func([]byte) (int64, error) { return 0, nil }); !errors.Is(err, coordinator.ErrStalled) || off != 0 {
		t.Fatalf("no progress: %d %v", off, err)
	}
	if off, err := coordinator.Replay(coordtest.NewMemLog(), func([]byte) (int64, error) {
		t.Fatal("nothing to apply")
		return 0, nil
	}); err != nil || off != 0 {
		t.Fatalf("empty log: %d %v", off, err)
	}
}

func TestLoopsEndTogether(t *testing.T) {
	l := coordinator.NewLoops()
	var ticks atomic.Int32
	l.Every(time.Millisecond, func() { ticks.Add(1) })
	started := make(chan struct{})
	l.Go(func() {
		close(started)
		<-l.Context().Done()
	})
	<-started
	deadline := time.Now().Add(5 * time.Second)
	for ticks.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	l.Cancel()
	l.Wait()
	after := ticks.Load()
	time.Sleep(5 * time.Millisecond)
	if after < 3 || ticks.Load() != after {
		t.Fatalf("ticks %d then %d", after, ticks.Load())
	}
}
