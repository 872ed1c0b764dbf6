package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newTestResponses returns Responses over w that count their stops.
func newTestResponses(w io.Writer, mute *Mute, inFlight int) (*Responses, *atomic.Int32) {
	var stops atomic.Int32
	return NewResponses(w, mute, inFlight, func() { stops.Add(1) }), &stops
}

func slots(t *testing.T, r *Responses, n int) []*Slot {
	t.Helper()
	var out []*Slot
	for i := 0; i < n; i++ {
		s := r.NewSlot(context.Background())
		if s == nil {
			t.Fatalf("slot %d refused", i)
		}
		out = append(out, s)
	}
	return out
}

// TestResponsesInRequestOrder: frames leave in request order whatever
// order their slots finish in; a slot without a frame writes nothing; the
// goroutine finishing the oldest slot writes it and the finished ones
// after it before Finish returns.
func TestResponsesInRequestOrder(t *testing.T) {
	var out bytes.Buffer
	r, stops := newTestResponses(&out, &Mute{}, 8)
	s := slots(t, r, 4)
	s[2].Frame = []byte("c")
	s[2].Finish()
	s[1].Finish() // no response (acks=0)
	if out.Len() != 0 {
		t.Fatalf("wrote %q before the first slot finished", out.String())
	}
	s[0].Frame = []byte("a")
	s[0].Finish()
	if out.String() != "ac" {
		t.Fatalf("wrote %q, want \"ac\"", out.String())
	}
	r.ReaderDone()
	select {
	case <-r.Done():
		t.Fatal("stopped with a slot unanswered")
	default:
	}
	s[3].Frame = []byte("d")
	s[3].Finish()
	<-r.Done()
	if out.String() != "acd" || stops.Load() != 1 || r.Err() != nil {
		t.Fatalf("wrote %q, %d stops, err %v", out.String(), stops.Load(), r.Err())
	}
}

// TestResponsesStop: CloseAfter stops after its frame, a failed write
// stops with its error, Stop stops at once; each runs onStop once, and
// later slots are neither written nor given out.
func TestResponsesStop(t *testing.T) {
	var out bytes.Buffer
	r, stops := newTestResponses(&out, &Mute{}, 8)
	s := slots(t, r, 2)
	s[0].Frame, s[0].CloseAfter = []byte("x"), true
	s[1].Frame = []byte("y")
	s[1].Finish()
	s[0].Finish()
	<-r.Done()
	if out.String() != "x" || stops.Load() != 1 || r.NewSlot(context.Background()) != nil {
		t.Fatalf("wrote %q, %d stops", out.String(), stops.Load())
	}
	r.ReaderDone()
	r.Stop()
	if stops.Load() != 1 {
		t.Fatalf("%d stops", stops.Load())
	}

	r, stops = newTestResponses(failWriter{}, &Mute{}, 8)
	s = slots(t, r, 1)
	s[0].Frame = []byte("z")
	s[0].Finish()
	<-r.Done()
	if !errors.Is(r.Err(), errWrite) || stops.Load() != 1 {
		t.Fatalf("err %v, %d stops; want the write error, one stop", r.Err(), stops.Load())
	}

	out.Reset()
	r, stops = newTestResponses(&out, &Mute{}, 8)
	s = slots(t, r, 1) // never finished before the stop
	r.Stop()
	<-r.Done()
	s[0].Frame = []byte("late")
	s[0].Finish()
	if out.Len() != 0 || stops.Load() != 1 {
		t.Fatalf("wrote %q after Stop, %d stops", out.String(), stops.Load())
	}
}

// TestResponsesBoundInFlight: NewSlot waits while inFlight slots are
// unanswered, and gives up when its context ends.
func TestResponsesBoundInFlight(t *testing.T) {
	var out bytes.Buffer
	r, _ := newTestResponses(&out, &Mute{}, 2)
	s := slots(t, r, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r.NewSlot(ctx) != nil {
		t.Fatal("a third slot with two in flight")
	}
	got := make(chan *Slot, 1)
	go func() { got <- r.NewSlot(context.Background()) }()
	s[0].Finish()
	if third := <-got; third == nil {
		t.Fatal("no slot once one was answered")
	}
}

// TestResponsesConcurrentFinish: many handlers finishing at once, in any
// order, still write every frame once and in request order (run with
// -race).
func TestResponsesConcurrentFinish(t *testing.T) {
	var out lockedBuffer
	r, stops := newTestResponses(&out, &Mute{}, 16)
	const n = 2000
	var want bytes.Buffer
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		s := r.NewSlot(context.Background())
		if s == nil {
			t.Fatal("slot refused")
		}
		frame := fmt.Appendf(nil, "%d,", i)
		want.Write(frame)
		wg.Go(func() {
			if i%3 == 0 {
				runtime.Gosched()
			}
			s.Frame = frame
			s.Finish()
		})
	}
	wg.Wait()
	r.ReaderDone()
	<-r.Done()
	if out.String() != want.String() || stops.Load() != 1 {
		t.Fatalf("frames out of order or lost (%d bytes of %d), %d stops", len(out.String()), want.Len(), stops.Load())
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var errWrite = errors.New("write failed")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

// TestResponsesMuteBeforeWriting: a throttled frame mutes the reader by
// the time the client can have it.
func TestResponsesMuteBeforeWriting(t *testing.T) {
	var mute Mute
	w := &checkMuted{mute: &mute}
	r, _ := newTestResponses(w, &mute, 1)
	s := slots(t, r, 1)
	s[0].Frame, s[0].ThrottleMs = []byte("t"), 60_000
	s[0].Finish()
	if !w.mutedAtWrite {
		t.Fatal("not muted when the frame was written")
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

// TestResponsesWriteFinishedSlotsAtOnce: the answers that are finished
// when the head slot finishes leave in one vectored write, not one write
// each (counted as the process's write syscalls, /proc/self/io syscw).
func TestResponsesWriteFinishedSlotsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	const n = 6
	r, _ := newTestResponses(server, &Mute{}, n)
	s := slots(t, r, n)
	for i := n - 1; i >= 1; i-- {
		s[i].Frame = []byte{byte('a' + i)}
		s[i].Finish()
	}
	s[0].Frame = []byte{'a'}
	before := writeSyscalls(t)
	s[0].Finish()
	if got := writeSyscalls(t) - before; got != 1 {
		t.Fatalf("%d answers took %d write syscalls, want 1", n, got)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "abcdef" {
		t.Fatalf("read %q, %v; want \"abcdef\"", got, err)
	}
}

// writeSyscalls is the write syscalls this process has made (Linux).
func writeSyscalls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatalf("reading /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscw in /proc/self/io")
	return 0
}
