package metadata

// Additions for the controller: fenced partition-state writes and
// the initial state of a partition.

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrFenced: a guarded write found its guard key gone or replaced — the
// writer (a controller) is no longer elected and must stop acting.
var ErrFenced = errors.New("metadata: fenced: guard key gone")

// Guard fences a write on a key that only the current writer owns: the
// write happens only while Key exists with this CreateRevision. The
// controller passes its election key (concurrency.Election Key and Rev),
// so a deposed controller whose session has not yet noticed the loss
// cannot overwrite the new controller's decisions.
type Guard struct {
	Key            string
	CreateRevision int64
}

// holds reports whether the guard's key, read in the Else branch of a
// failed transaction, still matched.
func (g *Guard) holds(tr *clientv3.TxnResponse) bool {
	for _, r := range tr.Responses {
		rr := r.GetResponseRange()
		if rr == nil {
			continue
		}
		for _, kv := range rr.Kvs {
			if string(kv.Key) == g.Key && kv.CreateRevision == g.CreateRevision {
				return true
			}
		}
	}
	return false
}

// CASPartitionStateGuarded is CASPartitionState that also requires the
// guard key to exist with the guard's create revision. A failed guard
// returns ErrFenced (it takes precedence over a stale version, which
// returns ErrCASFailed).
func (s *Store) CASPartitionStateGuarded(ctx context.Context, id TopicID, partition int32, st PartitionState, guard Guard) (int64, error) {
	return s.casPartitionState(ctx, id, partition, st, &guard)
}

// InitialPartitionState is the state of a partition whose key was never
// written (Version 0): leader = first replica, epoch 0, ISR = replicas,
// LeaderBrokerEpoch 0 (so nobody leads it until the controller writes it).
// Empty replicas (a diskless partition) give leader -1.
func InitialPartitionState(replicas []int32) PartitionState {
	return initialPartitionState(replicas)
}
