package wire

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// TestWriteInOrderWaitsForEachSlot: frames leave in queue order whatever
// order their slots finish in; a slot without a frame writes nothing.
func TestWriteInOrderWaitsForEachSlot(t *testing.T) {
	queue := make(chan *Slot, 3)
	slots := []*Slot{NewSlot(), NewSlot(), NewSlot()}
	for _, s := range slots {
		queue <- s
	}
	close(queue)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- WriteInOrder(context.Background(), queue, &out, &Mute{}) }()
	slots[2].Frame = []byte("c")
	slots[2].Finish()
	slots[1].Finish() // no response (acks=0)
	select {
	case <-done:
		t.Fatal("writer finished before the first slot")
	case <-time.After(20 * time.Millisecond):
	}
	slots[0].Frame = []byte("a")
	slots[0].Finish()
	if err := <-done; err != nil || out.String() != "ac" {
		t.Fatalf("wrote %q, err %v; want \"ac\"", out.String(), err)
	}
}

// TestWriteInOrderStops: CloseAfter stops after its frame, a failed write
// returns its error, an ended context stops the wait.
func TestWriteInOrderStops(t *testing.T) {
	closing, after := NewSlot(), NewSlot()
	closing.Frame, closing.CloseAfter = []byte("x"), true
	closing.Finish()
	after.Frame = []byte("y")
	after.Finish()
	queue := make(chan *Slot, 2)
	queue <- closing
	queue <- after
	var out bytes.Buffer
	if err := WriteInOrder(context.Background(), queue, &out, &Mute{}); err != nil || out.String() != "x" {
		t.Fatalf("wrote %q, err %v; want \"x\"", out.String(), err)
	}

	failing := NewSlot()
	failing.Frame = []byte("z")
	failing.Finish()
	queue = make(chan *Slot, 1)
	queue <- failing
	if err := WriteInOrder(context.Background(), queue, failWriter{}, &Mute{}); !errors.Is(err, errWrite) {
		t.Fatalf("err %v, want the write error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	queue = make(chan *Slot, 1)
	queue <- NewSlot() // never finished
	if err := WriteInOrder(ctx, queue, &out, &Mute{}); err != nil {
		t.Fatalf("err %v after the context ended", err)
	}
}

var errWrite = errors.New("write failed")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

// TestWriteInOrderMutesBeforeWriting: a throttled frame mutes the reader
// by the time the client can have it.
func TestWriteInOrderMutesBeforeWriting(t *testing.T) {
	var mute Mute
	s := NewSlot()
	s.Frame, s.ThrottleMs = []byte("t"), 60_000
	s.Finish()
	queue := make(chan *Slot, 1)
	queue <- s
	close(queue)
	w := &checkMuted{mute: &mute}
	if err := WriteInOrder(context.Background(), queue, w, &mute); err != nil || !w.mutedAtWrite {
		t.Fatalf("err %v, muted at write %v", err, w.mutedAtWrite)
	}
	// The mute is capped: it ends at most maxThrottleMute from now.
	if until := time.Unix(0, mute.until.Load()); time.Until(until) > maxThrottleMute {
		t.Fatalf("muted until %v, beyond the cap", until)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	mute.Wait(ctx)
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("Wait returned before the mute or its context ended")
	}
}

type checkMuted struct {
	mute         *Mute
	mutedAtWrite bool
}

func (c *checkMuted) Write(p []byte) (int, error) {
	c.mutedAtWrite = c.mute.until.Load() > time.Now().UnixNano()
	return len(p), nil
}

func TestMuteZeroAndPastDoNotWait(t *testing.T) {
	var mute Mute
	mute.Wait(context.Background()) // never muted
	mute.Set(0)
	mute.Set(-5)
	if mute.until.Load() != 0 {
		t.Fatal("a non-positive throttle muted")
	}
	mute.until.Store(time.Now().Add(-time.Second).UnixNano())
	mute.Wait(context.Background()) // mute over
}

// TestTurnsChainInOrder: each turn waits for the one before it only, and
// releasing twice is harmless.
func TestTurnsChainInOrder(t *testing.T) {
	var turns Turns
	first, releaseFirst := turns.Next()
	if first != nil {
		t.Fatal("the first request waits for a turn")
	}
	second, releaseSecond := turns.Next()
	third, _ := turns.Next()
	select {
	case <-second:
		t.Fatal("second turn open before the first released")
	default:
	}
	releaseFirst()
	releaseFirst()
	<-second
	select {
	case <-third:
		t.Fatal("third turn open before the second released")
	default:
	}
	releaseSecond()
	<-third
}
