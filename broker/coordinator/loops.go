package coordinator

import (
	"context"
	"sync"
	"time"
)

// Loops are a coordinator's background goroutines (its clock, partition
// loads, marker jobs), which end together: Cancel ends their context,
// Wait waits for them.
//
// Go must not be called once Wait may have started. Owners ensure it by
// starting work only under their lock after checking ClosedLocked, and by
// calling CloseLocked under that lock before Wait.
type Loops struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewLoops returns a group running nothing.
func NewLoops() *Loops {
	l := &Loops{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Context is cancelled by Cancel: background work and waits for
// durability end with it.
func (l *Loops) Context() context.Context { return l.ctx }

// Go runs fn in the background.
func (l *Loops) Go(fn func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
}

// Every runs fn every interval in the background until Cancel.
func (l *Loops) Every(interval time.Duration, fn func()) {
	l.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-l.ctx.Done():
				return
			case <-t.C:
			}
			fn()
		}
	})
}

// Cancel ends the context of the background work.
func (l *Loops) Cancel() { l.cancel() }

// Wait waits for every goroutine started by Go or Every to return.
func (l *Loops) Wait() { l.wg.Wait() }
