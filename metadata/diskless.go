package metadata

// The coordinates of diskless partitions: one head per partition and one run
// per committed (shared object, partition). Values are opaque here; package
// diskless owns their JSON and the rules of the commit (diskless/doc.go).
// This file only stores them with the guards the commit protocol needs.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxDisklessValueBytes bounds a head or run value written or read back, well
// under etcd's default request limit (1.5 MiB).
const MaxDisklessValueBytes = 512 << 10

func (k keys) disklessRoot() string { return k.prefix + "diskless/" }
func (k keys) disklessHeads() string {
	return k.disklessRoot() + "heads/"
}
func (k keys) disklessRuns() string { return k.disklessRoot() + "runs/" }
func (k keys) disklessHead(p TierPartition) string {
	return fmt.Sprintf("%s%s/%05d", k.disklessHeads(), p.TopicID, p.Partition)
}
func (k keys) disklessRunsOf(p TierPartition) string {
	return fmt.Sprintf("%s%s/%05d/", k.disklessRuns(), p.TopicID, p.Partition)
}
func (k keys) disklessRun(p TierPartition, base int64) string {
	return fmt.Sprintf("%s%020d", k.disklessRunsOf(p), base)
}

// DisklessHead is a partition's head as stored: Value is nil and Version 0
// when the partition has none yet.
type DisklessHead struct {
	Partition TierPartition
	Value     []byte
	Version   int64 // etcd mod revision
}

// DisklessRun is one committed run as stored.
type DisklessRun struct {
	Partition  TierPartition
	BaseOffset int64
	Value      []byte
}

// DisklessWrite is one partition's part of a commit: the head as read
// (Seen: its Version, 0 if absent), the new head, and the new run (none when
// Run is nil: every batch was a duplicate).
type DisklessWrite struct {
	Partition TierPartition
	Seen      int64
	Head      []byte
	RunBase   int64
	Run       []byte
}

// DisklessHeads reads the heads of parts (absent ones with a nil Value),
// in the order given, at one revision.
func (s *Store) DisklessHeads(ctx context.Context, parts []TierPartition) ([]DisklessHead, error) {
	ops := make([]clientv3.Op, len(parts))
	for i, p := range parts {
		ops[i] = clientv3.OpGet(s.keys.disklessHead(p))
	}
	tr, err := s.txn(ctx, nil, ops)
	if err != nil {
		return nil, err
	}
	out := make([]DisklessHead, len(parts))
	for i, p := range parts {
		out[i].Partition = p
		if kvs := tr.Responses[i].GetResponseRange().Kvs; len(kvs) == 1 {
			out[i].Value, out[i].Version = kvs[0].Value, kvs[0].ModRevision
		}
	}
	return out, nil
}

// CommitDiskless writes every head and run of writes in one transaction if
// no head changed since it was read (mod revision == Seen, or still absent
// when Seen is 0). false, nil: some head changed; nothing was written.
//
// The runs are put before the heads. A watch delivers a transaction's
// events in the order of its operations, and a watcher applies them one by
// one: this way it never holds a head whose runs it has not seen yet (a
// reader woken by the head would find no run for the offsets it covers).
func (s *Store) CommitDiskless(ctx context.Context, writes []DisklessWrite) (bool, error) {
	cmps := make([]clientv3.Cmp, 0, len(writes))
	runs := make([]clientv3.Op, 0, len(writes))
	heads := make([]clientv3.Op, 0, len(writes))
	for _, w := range writes {
		if len(w.Head) > MaxDisklessValueBytes || len(w.Run) > MaxDisklessValueBytes {
			return false, fmt.Errorf("%w: diskless value of %d/%d bytes over %d", ErrInvalidConfig, len(w.Head), len(w.Run), MaxDisklessValueBytes)
		}
		head := s.keys.disklessHead(w.Partition)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(head), "=", w.Seen))
		heads = append(heads, clientv3.OpPut(head, string(w.Head)))
		if w.Run != nil {
			runs = append(runs, clientv3.OpPut(s.keys.disklessRun(w.Partition, w.RunBase), string(w.Run)))
		}
	}
	tr, err := s.txn(ctx, cmps, append(runs, heads...))
	if err != nil {
		return false, err
	}
	return tr.Succeeded, nil
}

// PutDisklessHead replaces one head if it is still at version seen (0:
// absent), for changes that add no run (a raised log start). false, nil: it
// changed meanwhile.
func (s *Store) PutDisklessHead(ctx context.Context, p TierPartition, seen int64, head []byte) (bool, error) {
	return s.CommitDiskless(ctx, []DisklessWrite{{Partition: p, Seen: seen, Head: head}})
}

// DeleteDisklessRuns deletes runs (by base offset) of one partition, in
// one transaction. Runs are immutable once committed, so no guard is needed:
// the merge deletes only runs it has copied into a committed segment object.
func (s *Store) DeleteDisklessRuns(ctx context.Context, p TierPartition, bases []int64) error {
	ops := make([]clientv3.Op, 0, len(bases))
	for _, b := range bases {
		ops = append(ops, clientv3.OpDelete(s.keys.disklessRun(p, b)))
	}
	for len(ops) > 0 {
		n := min(len(ops), 100) // under etcd's default --max-txn-ops (128)
		if _, err := s.txn(ctx, nil, ops[:n]); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// DisklessSnapshot is every head and run at one revision.
type DisklessSnapshot struct {
	Heads    []DisklessHead
	Runs     []DisklessRun
	Revision int64
}

// LoadDiskless reads every head and run at one revision, in key order
// (runs of a partition by base offset).
func (s *Store) LoadDiskless(ctx context.Context) (DisklessSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*s.cfg.RequestTimeout)
	defer cancel()
	var snap DisklessSnapshot
	prefix := s.keys.disklessRoot()
	key, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(1000)}
		if snap.Revision > 0 {
			opts = append(opts, clientv3.WithRev(snap.Revision))
		}
		resp, err := s.client.Get(ctx, key, opts...)
		if err != nil {
			return DisklessSnapshot{}, s.wrapErr(err)
		}
		if snap.Revision == 0 {
			snap.Revision = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			ev, ok := s.disklessEvent(kv, false)
			if !ok {
				continue
			}
			if ev.Kind == DisklessHeadPut {
				snap.Heads = append(snap.Heads, DisklessHead{Partition: ev.Partition, Value: ev.Value, Version: kv.ModRevision})
			} else {
				snap.Runs = append(snap.Runs, DisklessRun{Partition: ev.Partition, BaseOffset: ev.BaseOffset, Value: ev.Value})
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return snap, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// DisklessEventKind says what a DisklessEvent reports.
type DisklessEventKind int

const (
	DisklessHeadPut DisklessEventKind = iota
	DisklessHeadDeleted
	DisklessRunPut
	DisklessRunDeleted
	// DisklessResync: events were lost (etcd compacted the watched
	// revision); reload with LoadDiskless and watch from its revision.
	DisklessResync
)

// DisklessEvent is one change under diskless/.
type DisklessEvent struct {
	Kind       DisklessEventKind
	Partition  TierPartition
	BaseOffset int64  // runs
	Value      []byte // puts
	Revision   int64
}

// WatchDiskless streams changes to heads and runs after revision rev, in
// revision order, resuming after a broken stream and sending DisklessResync
// (then ending nothing: the caller reloads and watches again) when rev was
// compacted. Closed when ctx ends or the store closes.
func (s *Store) WatchDiskless(ctx context.Context, rev int64) <-chan DisklessEvent {
	out := make(chan DisklessEvent, watchBuffer)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.baseCtx, cancel)
		defer stop()
		for ctx.Err() == nil {
			next, err := s.watchDisklessOnce(ctx, rev, out)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, rpctypes.ErrCompacted) {
				select {
				case out <- DisklessEvent{Kind: DisklessResync}:
				case <-ctx.Done():
				}
				return
			}
			if err != nil {
				s.log.Warn("diskless watch broke, resuming", "revision", next, "err", err)
			}
			rev = next
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
	return out
}

func (s *Store) watchDisklessOnce(ctx context.Context, rev int64, out chan<- DisklessEvent) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(wctx, s.keys.disklessRoot(), clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return rev, err
		}
		for _, e := range resp.Events {
			ev, ok := s.disklessEvent(e.Kv, e.Type == mvccpb.DELETE)
			if !ok {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return rev, ctx.Err()
			}
		}
		if resp.Header.Revision > 0 {
			rev = resp.Header.Revision + 1
		}
	}
	return rev, nil
}

// disklessEvent parses one key under diskless/; false for keys it does not
// know (logged) and oversized values.
func (s *Store) disklessEvent(kv *mvccpb.KeyValue, deleted bool) (DisklessEvent, bool) {
	key := string(kv.Key)
	ev := DisklessEvent{Revision: kv.ModRevision, Value: kv.Value}
	var err error
	switch {
	case strings.HasPrefix(key, s.keys.disklessHeads()):
		ev.Kind = DisklessHeadPut
		if deleted {
			ev.Kind = DisklessHeadDeleted
		}
		ev.Partition, err = parseDisklessPartition(strings.TrimPrefix(key, s.keys.disklessHeads()))
	case strings.HasPrefix(key, s.keys.disklessRuns()):
		ev.Kind = DisklessRunPut
		if deleted {
			ev.Kind = DisklessRunDeleted
		}
		rest := strings.TrimPrefix(key, s.keys.disklessRuns())
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			err = errors.New("no base offset")
			break
		}
		ev.Partition, err = parseDisklessPartition(rest[:i])
		if err == nil {
			ev.BaseOffset, err = strconv.ParseInt(rest[i+1:], 10, 64)
		}
	default:
		err = errors.New("unknown key")
	}
	if err == nil && len(kv.Value) > MaxDisklessValueBytes {
		err = fmt.Errorf("value of %d bytes", len(kv.Value))
	}
	if err != nil {
		s.log.Error("diskless: ignoring key", "key", key, "err", err)
		return DisklessEvent{}, false
	}
	if deleted {
		ev.Value = nil
	}
	return ev, true
}

// parseDisklessPartition reads "<topicId>/<partition:05>".
func parseDisklessPartition(s string) (TierPartition, error) {
	id, p, err := parsePartitionKey(s)
	return TierPartition{TopicID: id, Partition: p}, err
}
