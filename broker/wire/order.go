package wire

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Slot is one request's place in its connection's response order. The
// one goroutine serving the request (a handler, or the reader for inline
// and SASL requests) sets its fields and then calls Finish; the fields are
// read only after that.
type Slot struct {
	resp *Responses
	// finished is set by Finish; guarded by resp.mu.
	finished bool
	// Frame is the encoded response, from GetFrameBuffer or not; nil for
	// requests without a response.
	Frame []byte
	// CloseAfter closes the connection once its answers reached this slot
	// (after writing Frame, if any).
	CloseAfter bool
	// ThrottleMs mutes the connection's reader after Frame is written.
	ThrottleMs int32
}

// Finish hands the slot to its connection's writer. Call exactly once.
func (s *Slot) Finish() { s.resp.finish(s) }

// Responses writes one connection's answers in request order. There is no
// writer goroutine: the goroutine that finishes the oldest unanswered slot
// writes it, and every finished slot after it, while the others only mark
// their slot finished. A handler answering the request at the head so
// writes its own answer without waking anyone, which on a connection of
// small requests saves a goroutine wake-up and switch per request.
//
// Writing stops (for good) after a slot with CloseAfter, a failed write,
// Stop, or once the reader is done and every slot is answered; then onStop
// runs once (the connection closes) and Done is closed.
type Responses struct {
	w      io.Writer
	mute   *Mute
	onStop func()
	room   chan struct{} // a token per slot in flight: capacity bounds them
	done   chan struct{}
	// batch and bufs are the writer's scratch space, reused across
	// writes; owned by the goroutine that set mu.writing.
	batch []*Slot
	bufs  net.Buffers

	mu struct {
		sync.Mutex
		queue      []*Slot // slots not yet written, oldest first; guarded by mu
		writing    bool    // a goroutine is writing; guarded by mu
		readerDone bool    // no slot will be added; guarded by mu
		stopped    bool    // guarded by mu
		err        error   // the failed write's; guarded by mu
	}
}

// NewResponses returns a writer of answers to w, at most inFlight slots
// queued at once. onStop runs once when writing stops.
func NewResponses(w io.Writer, mute *Mute, inFlight int, onStop func()) *Responses {
	return &Responses{w: w, mute: mute, onStop: onStop, room: make(chan struct{}, max(inFlight, 1)),
		done: make(chan struct{})}
}

// NewSlot queues a slot for the next request, waiting while inFlight
// slots are unanswered; nil when ctx ended or writing has stopped.
func (r *Responses) NewSlot(ctx context.Context) *Slot {
	select {
	case r.room <- struct{}{}:
	case <-ctx.Done():
		return nil
	case <-r.done:
		return nil
	}
	s := &Slot{resp: r}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.stopped {
		<-r.room
		return nil
	}
	r.mu.queue = append(r.mu.queue, s)
	return s
}

// ReaderDone says no more slots come: writing stops once every queued
// slot is answered.
func (r *Responses) ReaderDone() {
	r.mu.Lock()
	r.mu.readerDone = true
	stop := !r.mu.writing && len(r.mu.queue) == 0 && !r.mu.stopped
	if stop {
		r.stopLocked(nil)
	}
	r.mu.Unlock()
	if stop {
		r.onStop()
	}
}

// Stop stops writing now; slots not yet written are dropped.
func (r *Responses) Stop() {
	r.mu.Lock()
	stop := !r.mu.stopped
	if stop {
		r.stopLocked(nil)
	}
	r.mu.Unlock()
	if stop {
		r.onStop()
	}
}

// Done is closed when writing has stopped.
func (r *Responses) Done() <-chan struct{} { return r.done }

// Err is the failed write's error, if writing stopped on one.
func (r *Responses) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.err
}

// finish marks s finished and, unless another goroutine is writing, writes
// the finished slots at the head of the queue.
func (r *Responses) finish(s *Slot) {
	r.mu.Lock()
	s.finished = true
	if r.mu.stopped {
		r.mu.Unlock()
		PutFrameBuffer(s.Frame)
		s.Frame = nil
		return
	}
	if r.mu.writing {
		r.mu.Unlock()
		return
	}
	r.mu.writing = true
	stopped := r.writeHeadLocked()
	r.mu.writing = false
	if !r.mu.stopped && r.mu.readerDone && len(r.mu.queue) == 0 {
		r.stopLocked(nil)
		stopped = true
	}
	r.mu.Unlock()
	if stopped {
		r.onStop()
	}
}

// writeHeadLocked writes finished slots from the head of the queue, the
// lock released around each write; true if writing stopped here. The
// finished slots at the head go out in one vectored write: answers that
// finish together (the acks of one flush round) cost one syscall, not one
// each.
// REQUIRES: r.mu held, r.mu.writing set by the caller.
func (r *Responses) writeHeadLocked() bool {
	for !r.mu.stopped && len(r.mu.queue) > 0 && r.mu.queue[0].finished {
		batch := r.takeFinishedLocked()
		r.mu.Unlock()
		err := r.writeBatch(batch)
		for range batch {
			<-r.room
		}
		closeAfter := batch[len(batch)-1].CloseAfter
		clear(batch)
		r.mu.Lock()
		if r.mu.stopped {
			return false // stopped by another goroutine, which ran onStop
		}
		if err != nil || closeAfter {
			r.stopLocked(err)
			return true
		}
	}
	return false
}

// takeFinishedLocked removes the finished slots at the head of the queue,
// up to and including the first with CloseAfter, into the writer's batch.
// REQUIRES: r.mu held, r.mu.writing set by the caller.
func (r *Responses) takeFinishedLocked() []*Slot {
	batch := r.batch[:0]
	for len(r.mu.queue) > 0 && r.mu.queue[0].finished {
		s := r.mu.queue[0]
		r.mu.queue[0] = nil
		r.mu.queue = r.mu.queue[1:]
		batch = append(batch, s)
		if s.CloseAfter {
			break
		}
	}
	r.batch = batch
	return batch
}

// writeBatch writes the batch's frames in one vectored write (writev on a
// TCP connection; frame by frame through TLS) and puts their buffers back.
func (r *Responses) writeBatch(batch []*Slot) error {
	bufs := r.bufs[:0]
	var throttleMs int32
	for _, s := range batch {
		if s.Frame != nil {
			bufs = append(bufs, s.Frame)
		}
		throttleMs = max(throttleMs, s.ThrottleMs)
	}
	r.bufs = bufs
	var err error
	if len(bufs) > 0 {
		// Mute before writing: once the client has the answer it may send
		// at once, and the reader must already see the mute.
		r.mute.Set(throttleMs)
		// WriteTo consumes its receiver (a copy of bufs' header); the
		// frames to put back are the batch's.
		vec := net.Buffers(bufs)
		_, err = vec.WriteTo(r.w)
	}
	for _, s := range batch {
		PutFrameBuffer(s.Frame)
		s.Frame = nil
	}
	clear(bufs)
	return err
}

// stopLocked stops writing: queued slots are dropped (their frames go back
// to the pool as they finish). The caller runs onStop after unlocking.
// REQUIRES: r.mu held, not stopped yet.
func (r *Responses) stopLocked(err error) {
	r.mu.stopped, r.mu.err = true, err
	for _, s := range r.mu.queue {
		if s.finished {
			PutFrameBuffer(s.Frame)
			s.Frame = nil
		}
	}
	r.mu.queue = nil
	close(r.done)
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
