package metadata

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchBuffer is the event channel's capacity: enough to absorb a burst
// (a topic's partition states) without stalling etcd's stream.
const watchBuffer = 256

// Watch streams changes to topics, partition states, brokers and the tier
// manifest after
// revision rev (0: from now). See doc.go for how a consumer keeps a view and
// handles Resync. The channel is closed when ctx ends or the store closes.
func (s *Store) Watch(ctx context.Context, rev int64) <-chan Event {
	out := make(chan Event, watchBuffer)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.baseCtx, cancel)
		defer stop()
		w := watcher{s: s, out: out, names: map[TopicID]string{}}
		w.run(ctx, rev)
	}()
	return out
}

// watcher is owned by one Watch goroutine.
type watcher struct {
	s   *Store
	out chan<- Event
	// names caches topic id → name for PartitionPut events.
	names map[TopicID]string
}

// run re-establishes the etcd watch until ctx ends: after a break it resumes
// after the last revision it delivered; after compaction it sends Resync.
func (w *watcher) run(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		next, err := w.watchOnce(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			current, rerr := w.currentRevision(ctx)
			if rerr != nil {
				w.s.log.Warn("watch resync: cannot read revision", "err", rerr)
				sleepCtx(ctx, time.Second)
				continue
			}
			if !w.send(ctx, Event{Kind: Resync, Revision: current}) {
				return
			}
			clear(w.names)
			rev = current + 1
			continue
		}
		if err != nil {
			w.s.log.Warn("watch broke, resuming", "revision", next, "err", err)
		}
		rev = next
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// watchOnce runs one etcd watch from rev and returns the revision to resume
// from (one after the last fully delivered response).
func (w *watcher) watchOnce(ctx context.Context, rev int64) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	for resp := range w.s.client.Watch(wctx, w.s.keys.prefix, opts...) {
		if err := resp.Err(); err != nil {
			return rev, err
		}
		for _, ev := range resp.Events {
			e, ok := w.translate(ctx, ev)
			if ok && !w.send(ctx, e) {
				return rev, ctx.Err()
			}
		}
		if resp.Header.Revision > 0 {
			rev = resp.Header.Revision + 1
		}
	}
	return rev, nil
}

func (w *watcher) send(ctx context.Context, e Event) bool {
	select {
	case w.out <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *watcher) currentRevision(ctx context.Context) (int64, error) {
	resp, err := w.s.get(ctx, w.s.keys.clusterID(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// translate turns one etcd event into a Strata event; false for keys that
// are not reported (id index, counters) and for values that do not
// decode (logged).
func (w *watcher) translate(ctx context.Context, ev *clientv3.Event) (Event, bool) {
	k := w.s.keys
	key := string(ev.Kv.Key)
	rev := ev.Kv.ModRevision
	switch {
	case strings.HasPrefix(key, k.topics()):
		return w.topicEvent(strings.TrimPrefix(key, k.topics()), ev)
	case strings.HasPrefix(key, k.partitions()) && ev.Type == mvccpb.PUT:
		return w.partitionEvent(ctx, strings.TrimPrefix(key, k.partitions()), ev.Kv)
	case strings.HasPrefix(key, k.brokers()):
		return Event{Kind: BrokersChanged, Revision: rev}, true
	case strings.HasPrefix(key, k.tierRoot()):
		return w.tierEvent(strings.TrimPrefix(key, k.tierRoot()), ev)
	}
	return Event{}, false
}

func (w *watcher) topicEvent(name string, ev *clientv3.Event) (Event, bool) {
	if ev.Type == mvccpb.DELETE {
		e := Event{Kind: TopicDeleted, TopicName: name, Revision: ev.Kv.ModRevision}
		if ev.PrevKv != nil {
			if t, err := decodeTopic(name, ev.PrevKv.Value, ev.PrevKv.ModRevision); err == nil {
				e.Topic, e.TopicID = &t, t.ID
				delete(w.names, t.ID)
			}
		}
		return e, true
	}
	t, err := decodeTopic(name, ev.Kv.Value, ev.Kv.ModRevision)
	if err != nil {
		w.s.log.Error("watch: ignoring topic record", "topic", name, "err", err)
		return Event{}, false
	}
	w.names[t.ID] = name
	return Event{Kind: TopicPut, TopicName: name, TopicID: t.ID, Topic: &t, Revision: ev.Kv.ModRevision}, true
}

func (w *watcher) partitionEvent(ctx context.Context, rest string, kv *mvccpb.KeyValue) (Event, bool) {
	id, p, err := parsePartitionKey(rest)
	var st PartitionState
	if err == nil {
		st, err = decodePartitionState(kv.Value, kv.ModRevision)
	}
	if err != nil {
		w.s.log.Error("watch: ignoring partition state", "key", string(kv.Key), "err", err)
		return Event{}, false
	}
	return Event{Kind: PartitionPut, TopicName: w.topicName(ctx, id), TopicID: id, Partition: p,
		State: &st, Revision: kv.ModRevision}, true
}

// topicName resolves an id through the cache, then the id index; "" if the
// topic is gone.
func (w *watcher) topicName(ctx context.Context, id TopicID) string {
	if name, ok := w.names[id]; ok {
		return name
	}
	resp, err := w.s.get(ctx, w.s.keys.topicID(id))
	if err != nil || len(resp.Kvs) == 0 {
		return ""
	}
	name := string(resp.Kvs[0].Value)
	w.names[id] = name
	return name
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
