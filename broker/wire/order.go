package wire

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Slot is one request's place in its connection's response order. The
// one goroutine serving the request (a handler, or the reader for SASL
// requests) sets its fields and then calls Finish; WriteInOrder reads them
// only after that.
type Slot struct {
	done chan struct{}
	// Frame is the encoded response, from GetFrameBuffer or not; nil for
	// requests without a response.
	Frame []byte
	// CloseAfter closes the connection once the writer reached this slot
	// (after writing Frame, if any).
	CloseAfter bool
	// ThrottleMs mutes the connection's reader after Frame is written.
	ThrottleMs int32
}

// NewSlot returns an unfinished slot.
func NewSlot() *Slot { return &Slot{done: make(chan struct{})} }

// Finish hands the slot to the writer. Call exactly once.
func (s *Slot) Finish() { close(s.done) }

// WriteInOrder writes the frames of the slots in queue in queue order,
// each once its slot is finished, and returns when queue is closed and
// drained, a slot asks to close, or ctx ends (nil then), or a write fails
// (its error). Written frames go back to the pool (PutFrameBuffer). The
// caller closes the connection after it returns.
func WriteInOrder(ctx context.Context, queue <-chan *Slot, w io.Writer, mute *Mute) error {
	for s := range queue {
		select {
		case <-s.done:
		case <-ctx.Done():
			return nil
		}
		if s.Frame != nil {
			// Mute before writing: once the client has the answer it may send
			// at once, and the reader must already see the mute.
			mute.Set(s.ThrottleMs)
			_, err := w.Write(s.Frame)
			PutFrameBuffer(s.Frame)
			s.Frame = nil
			if err != nil {
				return err
			}
		}
		if s.CloseAfter {
			return nil
		}
	}
	return nil
}

// Turns chains the handlers of one connection so that their effects happen
// in the order the requests were sent (Kafka processes one request of a
// connection at a time), while the reader reads ahead. Owned by the
// connection's reader.
type Turns struct {
	// last is closed when the newest request so far releases its turn;
	// nil before the first request.
	last chan struct{}
}

// Next takes the turn after the newest request's. The new request's
// handler starts once prev is closed (prev is nil for the first request);
// release ends its turn and is safe to call more than once.
func (t *Turns) Next() (prev <-chan struct{}, release func()) {
	mine := make(chan struct{})
	prev, t.last = t.last, mine
	return prev, sync.OnceFunc(func() { close(mine) })
}

// maxThrottleMute bounds one mute, whatever a quota asked for.
const maxThrottleMute = 30 * time.Second

// Mute holds a connection's reader after a throttled response (KIP-219:
// the client waits too, so a compliant client never notices). Set by the
// writer, waited on by the reader. Requests the client pipelined before the
// throttled answer, already read, are not held back: at most the in-flight
// bound of them. The zero Mute is unmuted.
type Mute struct {
	until atomic.Int64 // unix nanoseconds; 0: never muted
}

// Set mutes for throttleMs from now (at most maxThrottleMute); <= 0 does
// nothing.
func (m *Mute) Set(throttleMs int32) {
	if throttleMs <= 0 {
		return
	}
	d := min(time.Duration(throttleMs)*time.Millisecond, maxThrottleMute)
	m.until.Store(time.Now().Add(d).UnixNano())
}

// Wait returns when the mute ends or ctx ends.
func (m *Mute) Wait(ctx context.Context) {
	until := m.until.Load()
	if until == 0 {
		return
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
