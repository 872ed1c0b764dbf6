package metadata

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CASAssignment writes a partition's assignment (the topic record's
// Replicas[partition], set to st.Replicas) and its state in one etcd
// transaction: reassignments change both, and a broker must never host by
// an assignment whose state says otherwise. It compares the topic key on
// t.Revision and the state key on st.Version (0: not yet written), and,
// with a guard, the guard key's create revision (ErrFenced when it fails).
// It returns the revision written.
func (s *Store) CASAssignment(ctx context.Context, t Topic, partition int32, st PartitionState, guard *Guard) (int64, error) {
	if partition < 0 || int(partition) >= len(t.Replicas) {
		return 0, fmt.Errorf("%w: topic %q has no partition %d", ErrInvalidPartitions, t.Name, partition)
	}
	if t.Diskless() {
		return 0, fmt.Errorf("%w: %s-%d: diskless partitions have no replicas to move", ErrInvalidReplicas, t.Name, partition)
	}
	stateValue, err := encodePartitionState(st)
	if err != nil {
		return 0, err
	}
	next := t
	next.Replicas = cloneAssignment(t.Replicas)
	next.Replicas[partition] = slices.Clone(st.Replicas)
	if err := validateAssignment(next.Replicas); err != nil {
		return 0, err
	}
	topicValue, err := encodeTopic(next)
	if err != nil {
		return 0, fmt.Errorf("metadata: encode topic: %w", err)
	}
	topicKey, stateKey := s.keys.topic(t.Name), s.keys.partition(t.ID, partition)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(topicKey), "=", t.Revision),
		clientv3.Compare(clientv3.ModRevision(stateKey), "=", st.Version),
	}
	var orElse []clientv3.Op
	if guard != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(guard.Key), "=", guard.CreateRevision))
		orElse = append(orElse, clientv3.OpGet(guard.Key, clientv3.WithKeysOnly()))
	}
	tr, err := s.txn(ctx, cmps, []clientv3.Op{
		clientv3.OpPut(topicKey, string(topicValue)),
		clientv3.OpPut(stateKey, string(stateValue)),
	}, orElse...)
	if err != nil {
		return 0, err
	}
	if !tr.Succeeded {
		if guard != nil && !guard.holds(tr) {
			return 0, fmt.Errorf("%w: guard %q (revision %d)", ErrFenced, guard.Key, guard.CreateRevision)
		}
		return 0, fmt.Errorf("%w: topic %s (revision %d) partition %d version %d", ErrCASFailed, t.Name, t.Revision, partition, st.Version)
	}
	return tr.Header.Revision, nil
}
