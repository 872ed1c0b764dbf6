package controller

import (
	"context"
	"errors"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/strata-log/strata/metadata"
)

// resignTimeout bounds the best-effort resign and lease revoke when a term
// ends; if they fail the session lease expires by its TTL.
const resignTimeout = 2 * time.Second

// campaignLoop runs terms until ctx ends: each round opens a session,
// campaigns, leads until the session or ctx ends, then resigns.
func (c *Controller) campaignLoop(ctx context.Context) {
	wait := newBackoff(100*time.Millisecond, 2*time.Second)
	for ctx.Err() == nil {
		led, err := c.campaignOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if led {
			wait.reset()
		}
		c.log.Warn("controller term ended, campaigning again", "err", err)
		wait.wait(ctx)
	}
}

// campaignOnce is one session: campaign, lead, resign. led reports whether
// it won the election.
func (c *Controller) campaignOnce(ctx context.Context) (led bool, err error) {
	client := c.cfg.Store.Client()
	// The session's keepalive stops when ctx ends (Close) or the lease is
	// lost; either way Done closes and the term ends.
	session, err := concurrency.NewSession(client,
		concurrency.WithTTL(c.cfg.sessionTTLSeconds()), concurrency.WithContext(ctx))
	if err != nil {
		return false, err
	}
	termCtx, endTerm := context.WithCancelCause(ctx)
	defer endTerm(nil)
	go func() {
		select {
		case <-session.Done():
			endTerm(errSessionLost)
		case <-termCtx.Done():
		}
	}()
	election := concurrency.NewElection(session, c.cfg.Store.ControllerPrefix())
	defer c.endSession(session, election)
	c.revokeStaleCandidacies(termCtx, session.Lease())
	if err := election.Campaign(termCtx, strconv.Itoa(int(c.cfg.NodeID))); err != nil {
		return false, err
	}
	guard := metadata.Guard{Key: election.Key(), CreateRevision: election.Rev()}
	c.active.Store(true)
	c.log.Info("elected controller", "session_ttl_s", c.cfg.sessionTTLSeconds())
	err = c.lead(termCtx, guard)
	// Stop claiming the role before the key goes: once it is deleted
	// another candidate may win at once.
	c.active.Store(false)
	c.log.Info("controller term over", "reason", err)
	return true, err
}

// endSession resigns and revokes the session's lease, best effort and
// bounded (the session's own Close would wait up to the TTL on a
// context that may already be cancelled).
func (c *Controller) endSession(session *concurrency.Session, election *concurrency.Election) {
	session.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	if election.Key() != "" {
		if err := election.Resign(ctx); err != nil {
			c.log.Debug("resign failed; the lease will expire", "err", err)
		}
	}
	if _, err := session.Client().Revoke(ctx, session.Lease()); err != nil {
		c.log.Debug("session revoke failed; the lease will expire", "err", err)
	}
}

var (
	// errObserveBroken: the observer's watch ended; it reads again.
	errObserveBroken = errors.New("controller: election watch ended")
	// errSessionLost: the election session's lease expired or could not be
	// renewed; the term ends and the candidate campaigns again.
	errSessionLost = errors.New("controller: election session lost")
)

// observeLoop keeps observed up to date: the elected controller is the
// value of the key with the lowest create revision under the prefix
// (concurrency.Election's rule).
func (c *Controller) observeLoop(ctx context.Context) {
	wait := newBackoff(100*time.Millisecond, 2*time.Second)
	for ctx.Err() == nil {
		err := c.observeOnce(ctx, &wait)
		if ctx.Err() != nil {
			return
		}
		c.observed.Store(-1) // unknown until etcd answers again
		c.log.Debug("observing the election failed", "err", err)
		wait.wait(ctx)
	}
}

// observeOnce reads the leader, then waits for any change under the
// prefix and reads again, until an error.
func (c *Controller) observeOnce(ctx context.Context, wait *backoff) error {
	client := c.cfg.Store.Client()
	prefix := c.cfg.Store.ControllerPrefix()
	for {
		rev, err := c.readLeader(ctx, client, prefix)
		if err != nil {
			return err
		}
		wait.reset()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		resp, ok := <-client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		cancel()
		if !ok {
			return errObserveBroken
		}
		if err := resp.Err(); err != nil {
			return err
		}
	}
}

// readLeader stores the observed leader and returns the read's revision.
func (c *Controller) readLeader(ctx context.Context, client *clientv3.Client, prefix string) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := client.Get(rctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return 0, err
	}
	id := int32(-1)
	if len(resp.Kvs) > 0 {
		n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 32)
		if err == nil && n >= 0 {
			id = int32(n)
		} else {
			c.log.Error("ignoring a bad controller election value", "key", string(resp.Kvs[0].Key))
		}
	}
	c.observed.Store(id)
	return resp.Header.Revision, nil
}

// revokeStaleCandidacies revokes the sessions of election keys that carry
// this node's id but not this session: a previous incarnation of this
// broker that died (kill -9) without resigning. Node ids are unique, so
// such a key can only be ours; without this a restarted broker — a
// restarted single node above all — would wait up to a session TTL for
// its own dead candidacy to expire before anyone could re-elect leaders.
// The broker registration replaces its old one the same way.
func (c *Controller) revokeStaleCandidacies(ctx context.Context, own clientv3.LeaseID) {
	client := c.cfg.Store.Client()
	rctx, cancel := context.WithTimeout(ctx, resignTimeout)
	defer cancel()
	resp, err := client.Get(rctx, c.cfg.Store.ControllerPrefix(), clientv3.WithPrefix())
	if err != nil {
		c.log.Debug("listing election keys", "err", err)
		return
	}
	me := strconv.Itoa(int(c.cfg.NodeID))
	for _, kv := range resp.Kvs {
		lease := clientv3.LeaseID(kv.Lease)
		if string(kv.Value) != me || lease == own || lease == clientv3.NoLease {
			continue
		}
		if _, err := client.Revoke(rctx, lease); err != nil {
			c.log.Debug("revoking a stale candidacy", "key", string(kv.Key), "err", err)
			continue
		}
		c.log.Info("revoked this node's stale controller candidacy", "key", string(kv.Key))
	}
}
