package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/metadata"
)

// maxParallelWrites bounds the partition state writes in flight: a broker
// death changes every partition it led at once.
const maxParallelWrites = 8

// errWatchEnded: the metadata watch closed while ctx was alive.
var errWatchEnded = errors.New("controller: metadata watch ended")

// leader is the active controller's state, owned by the goroutine running
// lead (no locks): the view of topics, states and brokers that Plan reads.
type leader struct {
	c     *Controller
	store *metadata.Store
	guard metadata.Guard
	// topics holds every topic by id with its partition states; states
	// only move forward (higher Version), whichever source brings them.
	topics  map[metadata.TopicID]*TopicView
	brokers []metadata.BrokerInfo
	// brokersStale: a BrokersChanged event arrived since the last read.
	brokersStale bool
}

// lead acts as controller until ctx ends or the election guard fails.
func (c *Controller) lead(ctx context.Context, guard metadata.Guard) error {
	l := &leader{c: c, store: c.cfg.Store, guard: guard}
	wait := newBackoff(100*time.Millisecond, 2*time.Second)
	for ctx.Err() == nil {
		err := l.follow(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if errors.Is(err, metadata.ErrFenced) {
			return err
		}
		if err != nil {
			c.log.Warn("controller view broke, reloading", "err", err)
			wait.wait(ctx)
			continue
		}
		wait.reset() // Resync: reload at once
	}
	return context.Cause(ctx)
}

// follow loads a snapshot and keeps it current from the watch, planning
// after changes (debounced) and periodically. It returns nil on Resync
// (the caller reloads), or an error.
func (l *leader) follow(ctx context.Context) error {
	snap, err := l.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	l.load(snap)
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := l.store.Watch(watchCtx, snap.Revision+1)
	ticker := time.NewTicker(l.c.cfg.ReplanInterval)
	defer ticker.Stop()
	rebalance, stopRebalance := every(l.c.cfg.RebalanceInterval)
	defer stopRebalance()
	autoBalance, stopAutoBalance := every(l.c.cfg.AutoBalanceInterval)
	defer stopAutoBalance()
	planSoon := time.After(0)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				return errWatchEnded
			}
			if ev.Kind == metadata.Resync {
				return nil
			}
			if l.apply(ev) && planSoon == nil {
				planSoon = time.After(l.c.cfg.Debounce)
			}
		case <-planSoon:
			planSoon = nil
			if again, err := l.replan(ctx); err != nil {
				return err
			} else if again {
				planSoon = time.After(l.c.cfg.Debounce)
			}
		case <-ticker.C:
			if _, err := l.replan(ctx); err != nil {
				return err
			}
		case <-rebalance:
			if err := l.rebalance(ctx); err != nil {
				return err
			}
		case <-autoBalance:
			if err := l.autoBalance(ctx); err != nil {
				return err
			}
		}
	}
}

// every ticks every d; a nil channel (never ready) when d <= 0.
func every(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// load replaces the view with a snapshot's.
func (l *leader) load(snap metadata.Snapshot) {
	l.topics = make(map[metadata.TopicID]*TopicView, len(snap.Topics))
	for _, t := range snap.Topics {
		tv := &TopicView{Topic: t, States: snap.Partitions[t.ID]}
		if t.Diskless() {
			tv.States = nil // nothing to keep led (Plan skips the topic too)
		}
		l.topics[t.ID] = tv
	}
	l.brokers, l.brokersStale = snap.Brokers, false
}

// apply folds one event into the view; true if planning may be needed.
func (l *leader) apply(ev metadata.Event) bool {
	switch ev.Kind {
	case metadata.TopicPut:
		l.putTopic(*ev.Topic)
	case metadata.TopicDeleted:
		l.deleteTopic(ev.TopicID, ev.TopicName)
	case metadata.PartitionPut:
		l.putState(ev.TopicID, ev.Partition, *ev.State)
	case metadata.BrokersChanged:
		l.brokersStale = true
	default:
		return false // tier events do not concern the controller
	}
	return true
}

// putTopic stores a newer topic record; partitions it adds start in their
// initial state. A diskless topic's partitions get no state at all.
func (l *leader) putTopic(t metadata.Topic) {
	tv, ok := l.topics[t.ID]
	if !ok {
		tv = &TopicView{}
		l.topics[t.ID] = tv
	} else if t.Revision <= tv.Topic.Revision {
		return
	}
	tv.Topic = t
	if t.Diskless() {
		return
	}
	for p := len(tv.States); p < len(t.Replicas); p++ {
		tv.States = append(tv.States, metadata.InitialPartitionState(t.Replicas[p]))
	}
}

func (l *leader) deleteTopic(id metadata.TopicID, name string) {
	if id.IsZero() {
		for tid, tv := range l.topics {
			if tv.Topic.Name == name {
				id = tid
			}
		}
	}
	delete(l.topics, id)
}

// putAssignment records a completed reassignment's topic write, so that
// the view matches etcd before the watch brings it.
func (l *leader) putAssignment(ch Change, revision int64) {
	tv, ok := l.topics[ch.TopicID]
	if !ok || int(ch.Partition) >= len(tv.Topic.Replicas) || tv.Topic.Revision >= revision {
		return
	}
	t := tv.Topic
	t.Replicas = slices.Clone(t.Replicas)
	t.Replicas[ch.Partition] = slices.Clone(ch.New.Replicas)
	t.Revision = revision
	tv.Topic = t
}

// putState stores st if it is newer than the view's.
func (l *leader) putState(id metadata.TopicID, partition int32, st metadata.PartitionState) {
	tv, ok := l.topics[id]
	if !ok || partition < 0 || int(partition) >= len(tv.States) {
		return // the topic's record arrives first; a later reload fixes any gap
	}
	if st.Version > tv.States[partition].Version {
		tv.States[partition] = st
	}
}

// view is the current View for Plan (sharing the view's slices: Plan does
// not modify them).
func (l *leader) view() View {
	v := View{Brokers: l.brokers, Topics: make([]TopicView, 0, len(l.topics))}
	for _, tv := range l.topics {
		v.Topics = append(v.Topics, *tv)
	}
	return v
}

// replan plans and writes. again reports that a write lost a race (the
// view was refreshed) and a new plan should follow soon. Only ErrFenced
// is returned as an error; other failures are logged and retried by the
// next periodic plan.
func (l *leader) replan(ctx context.Context) (again bool, err error) {
	if l.brokersStale {
		brokers, err := l.store.Brokers(ctx)
		if err != nil {
			l.c.log.Warn("cannot read brokers; planning later", "err", err)
			return false, nil
		}
		l.brokers, l.brokersStale = brokers, false
	}
	changes := Plan(l.view())
	if len(changes) == 0 {
		return false, nil
	}
	results := l.write(ctx, changes)
	return l.absorb(ctx, changes, results)
}

// writeResult is one change's outcome.
type writeResult struct {
	version int64
	err     error
}

// write applies changes with guarded CAS, maxParallelWrites at a time.
func (l *leader) write(ctx context.Context, changes []Change) []writeResult {
	results := make([]writeResult, len(changes))
	slots := make(chan struct{}, maxParallelWrites)
	var wg sync.WaitGroup
	for i, ch := range changes {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			var v int64
			var err error
			if ch.ChangesAssignment() {
				v, err = l.store.CASAssignment(ctx, ch.topic, ch.Partition, ch.New, &l.guard)
			} else {
				v, err = l.store.CASPartitionStateGuarded(ctx, ch.TopicID, ch.Partition, ch.New, l.guard)
			}
			results[i] = writeResult{version: v, err: err}
		}()
	}
	wg.Wait()
	return results
}

// absorb folds write results into the view: successes advance the state;
// a lost race re-reads the topic's states; a gone topic leaves the view.
func (l *leader) absorb(ctx context.Context, changes []Change, results []writeResult) (again bool, err error) {
	var stale []metadata.TopicID
	for i, ch := range changes {
		res := results[i]
		log := l.c.log.With("topic", ch.Topic, "partition", ch.Partition)
		switch {
		case res.err == nil:
			st := ch.New
			st.Version = res.version
			if ch.ChangesAssignment() {
				l.putAssignment(ch, res.version)
			}
			l.putState(ch.TopicID, ch.Partition, st)
			log.Info("partition state changed", "change", ch.String(), "version", res.version)
		case errors.Is(res.err, metadata.ErrFenced):
			err = res.err
		case errors.Is(res.err, metadata.ErrCASFailed):
			stale = append(stale, ch.TopicID)
			if ch.ChangesAssignment() {
				l.refreshTopicRecord(ctx, ch.Topic)
			}
		case errors.Is(res.err, metadata.ErrTopicNotFound):
			delete(l.topics, ch.TopicID)
		default:
			log.Warn("partition state write failed; retrying later", "change", ch.String(), "err", res.err)
		}
	}
	if err != nil {
		return false, err
	}
	slices.SortFunc(stale, func(a, b metadata.TopicID) int { return slices.Compare(a[:], b[:]) })
	for _, id := range slices.Compact(stale) {
		l.refreshTopic(ctx, id)
	}
	return len(stale) > 0, nil
}

// refreshTopicRecord re-reads a topic's record after a lost assignment
// race (the topic's revision moved: configs, partitions added).
func (l *leader) refreshTopicRecord(ctx context.Context, name string) {
	t, err := l.store.Topic(ctx, name)
	if err != nil {
		l.c.log.Warn("cannot re-read topic", "topic", name, "err", err)
		return
	}
	l.putTopic(t)
}

// refreshTopic re-reads one topic's states after a lost CAS race.
func (l *leader) refreshTopic(ctx context.Context, id metadata.TopicID) {
	states, err := l.store.PartitionStates(ctx, id)
	switch {
	case errors.Is(err, metadata.ErrTopicNotFound):
		delete(l.topics, id)
	case err != nil:
		l.c.log.Warn("cannot re-read partition states", "topic_id", id.String(), "err", err)
	default:
		for p, st := range states {
			l.putState(id, int32(p), st)
		}
	}
}

// rebalance moves leadership back to preferred replicas (Rebalance) once
// Plan has nothing left to do; lost races are re-read by absorb and
// retried at the next interval.
func (l *leader) rebalance(ctx context.Context) error {
	if again, err := l.replan(ctx); err != nil || again {
		return err
	}
	changes := Rebalance(l.view(), l.c.cfg.ImbalancePercentage)
	if len(changes) == 0 {
		return nil
	}
	_, err := l.absorb(ctx, changes, l.write(ctx, changes))
	return err
}

// autoBalance is one --auto-balance round: once Plan has nothing to do, it
// begins the moves AutoBalance picks, then elects preferred leaders
// (rebalance), which hands leadership to the new first replicas of the
// moves finished since the previous round.
func (l *leader) autoBalance(ctx context.Context) error {
	if again, err := l.replan(ctx); err != nil || again {
		return err
	}
	changes, waiting := AutoBalance(l.view(), l.c.cfg.AutoBalanceMaxMoves, time.Now().UnixMilli())
	if waiting != "" {
		l.c.log.Debug("auto-balance waits", "reason", waiting)
	}
	if err := l.beginMoves(ctx, changes); err != nil {
		return err
	}
	return l.rebalance(ctx)
}

// beginMoves writes moves one at a time: each rewrites its topic's record,
// which CASAssignment compares on its revision, so moves of one topic
// written together would all but one lose the race. Each is rebased on the
// view's record of its topic, which the write before it advanced. A move
// that loses a race is dropped (absorb re-reads what changed); the next
// round plans again.
func (l *leader) beginMoves(ctx context.Context, changes []Change) error {
	for _, ch := range changes {
		tv, ok := l.topics[ch.TopicID]
		if !ok {
			continue
		}
		ch.topic = tv.Topic
		if _, err := l.absorb(ctx, []Change{ch}, l.write(ctx, []Change{ch})); err != nil {
			return err
		}
	}
	return nil
}
