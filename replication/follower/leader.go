package follower

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/replication/peer"
)

// errPeerAnswer: the leader answered with a request-level error.
var errPeerAnswer = errors.New("follower: leader refused the request")

// leaderFollower is the goroutine serving the tasks of one leader.
type leaderFollower struct {
	m      *Manager
	leader int32
	// ctx ends when the leaderFollower has no tasks left or the manager closes.
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}       // capacity 1: a pending wake-up
	tasks  map[Partition]*task // guarded by m.mu
}

func newLeaderFollower(m *Manager, leader int32) *leaderFollower {
	ctx, cancel := context.WithCancel(m.ctx)
	return &leaderFollower{m: m, leader: leader, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), tasks: map[Partition]*task{}}
}

// poke wakes the leaderFollower if it is idle or backing off. Never blocks.
func (f *leaderFollower) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run serves the tasks until its context ends. It owns the client.
func (f *leaderFollower) run() {
	defer f.m.wg.Done()
	var (
		cl      peer.Client
		addr    string
		backoff time.Duration
		failing bool
	)
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for f.ctx.Err() == nil {
		if cl == nil {
			var err error
			if cl, addr, err = f.connect(); err != nil {
				failing, backoff = f.failed(failing, backoff, err)
				continue
			}
		}
		if err := f.round(cl); err != nil {
			if f.ctx.Err() != nil {
				return
			}
			if a := f.m.cfg.Peers.Address(f.leader); a != addr { // the leader moved: dial anew
				cl.Close()
				cl = nil
			}
			failing, backoff = f.failed(failing, backoff, err)
			continue
		}
		if failing {
			f.m.log.Info("follower reconnected to the leader", "leader", f.leader)
		}
		failing, backoff = false, 0
	}
}

// connect resolves the leader's address and makes a client.
func (f *leaderFollower) connect() (peer.Client, string, error) {
	addr := f.m.cfg.Peers.Address(f.leader)
	if addr == "" {
		return nil, "", fmt.Errorf("follower: no address known for broker %d", f.leader)
	}
	cl, err := f.m.cfg.Peers.Dial(f.leader, addr)
	return cl, addr, err
}

// failed logs the start of a failure streak and sleeps the next back-off.
func (f *leaderFollower) failed(failing bool, backoff time.Duration, err error) (bool, time.Duration) {
	if !failing {
		f.m.log.Warn("follower cannot reach the leader; retrying", "leader", f.leader, "err", err)
	}
	backoff = min(max(2*backoff, minFetchBackoff), maxFetchBackoff)
	f.sleep(backoff)
	return true, backoff
}

// sleep waits d, or less if the leaderFollower is poked or stopped.
func (f *leaderFollower) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.wake:
	case <-f.ctx.Done():
	}
}

// round sends the pending epoch queries, then one fetch for every
// partition ready to fetch; with nothing to do it sleeps until poked or a
// delayed task is due. A returned error is a connection-level failure.
func (f *leaderFollower) round(cl peer.Client) error {
	queries, fetches, due := f.m.work(f, time.Now())
	if len(queries) > 0 {
		if err := f.sendQueries(cl, queries); err != nil {
			return err
		}
	}
	if len(fetches) == 0 {
		if len(queries) == 0 {
			wait := idleRecheck
			if !due.IsZero() {
				wait = min(max(time.Until(due), 0), idleRecheck)
			}
			f.sleep(wait)
		}
		return nil
	}
	return f.fetch(cl, f.flushedBeforeFetch(fetches))
}

// request sends req with a deadline of wait plus the peer overhead.
func (f *leaderFollower) request(cl peer.Client, req kmsg.Request, wait time.Duration) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(f.ctx, wait+peer.RequestOverhead)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		f.m.counters.requestErrors.Add(1)
		return nil, fmt.Errorf("follower: request %d to broker %d: %w", req.Key(), f.leader, err)
	}
	return resp, nil
}
