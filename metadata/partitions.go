package metadata

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PartitionStates returns the states of every partition of a topic, indexed
// by partition: the stored state where one was written, the initial state
// (Version 0) elsewhere. Topic and states are read at one revision.
func (s *Store) PartitionStates(ctx context.Context, id TopicID) ([]PartitionState, error) {
	resp, err := s.get(ctx, s.keys.topicID(id))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: id %s", ErrTopicNotFound, id)
	}
	name := string(resp.Kvs[0].Value)
	tr, err := s.txn(ctx, nil, []clientv3.Op{
		clientv3.OpGet(s.keys.topic(name)),
		clientv3.OpGet(s.keys.partitionsOf(id), clientv3.WithPrefix()),
	})
	if err != nil {
		return nil, err
	}
	topicKVs := tr.Responses[0].GetResponseRange().Kvs
	if len(topicKVs) == 0 {
		return nil, fmt.Errorf("%w: id %s", ErrTopicNotFound, id)
	}
	t, err := decodeTopic(name, topicKVs[0].Value, topicKVs[0].ModRevision)
	if err != nil {
		return nil, err
	}
	if t.ID != id {
		return nil, fmt.Errorf("%w: id %s (name %q now has another id)", ErrTopicNotFound, id, name)
	}
	return s.statesOf(t, tr.Responses[1].GetResponseRange().Kvs), nil
}

// statesOf overlays stored states (kvs under partitions/<id>/) on the
// topic's initial states. Keys that do not decode, or name a partition the
// topic does not have, are logged and ignored.
func (s *Store) statesOf(t Topic, kvs []*mvccpb.KeyValue) []PartitionState {
	states := make([]PartitionState, len(t.Replicas))
	for p, replicas := range t.Replicas {
		states[p] = initialPartitionState(replicas)
	}
	for _, kv := range kvs {
		id, p, err := parsePartitionKey(strings.TrimPrefix(string(kv.Key), s.keys.partitions()))
		if err == nil && (id != t.ID || int(p) >= len(states)) {
			err = fmt.Errorf("%w: partition key %q outside topic %q", ErrCorrupt, kv.Key, t.Name)
		}
		var st PartitionState
		if err == nil {
			st, err = decodePartitionState(kv.Value, kv.ModRevision)
		}
		if err != nil {
			s.log.Error("ignoring partition state", "key", string(kv.Key), "err", err)
			continue
		}
		states[p] = st
	}
	return states
}

// CASPartitionState writes st if the stored version equals st.Version
// (0: the partition still has its initial state); otherwise ErrCASFailed.
// Returns the new version. st must be consistent: leader -1 or a replica,
// ISR within replicas (ErrInvalidReplicas otherwise).
func (s *Store) CASPartitionState(ctx context.Context, id TopicID, partition int32, st PartitionState) (int64, error) {
	return s.casPartitionState(ctx, id, partition, st, nil)
}

// casPartitionState is CASPartitionState with an optional fencing guard
// (CASPartitionStateGuarded).
func (s *Store) casPartitionState(ctx context.Context, id TopicID, partition int32, st PartitionState, guard *Guard) (int64, error) {
	if partition < 0 || partition >= MaxPartitions {
		return 0, fmt.Errorf("%w: partition %d", ErrInvalidPartitions, partition)
	}
	value, err := encodePartitionState(st)
	if err != nil {
		return 0, err
	}
	key := s.keys.partition(id, partition)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", st.Version)}
	if st.Version == 0 {
		if err := s.checkPartitionExists(ctx, id, partition); err != nil {
			return 0, err
		}
		// The topic must still exist when the key is created, or a write
		// racing a delete would leave an orphan state behind.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.topicID(id)), ">", 0))
	}
	var orElse []clientv3.Op
	if guard != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(guard.Key), "=", guard.CreateRevision))
		orElse = append(orElse, clientv3.OpGet(guard.Key, clientv3.WithKeysOnly()))
	}
	tr, err := s.txn(ctx, cmps, []clientv3.Op{clientv3.OpPut(key, string(value))}, orElse...)
	if err != nil {
		return 0, err
	}
	if !tr.Succeeded {
		if guard != nil && !guard.holds(tr) {
			return 0, fmt.Errorf("%w: guard %q (revision %d)", ErrFenced, guard.Key, guard.CreateRevision)
		}
		return 0, fmt.Errorf("%w: topic %s partition %d version %d", ErrCASFailed, id, partition, st.Version)
	}
	return tr.Header.Revision, nil
}

// checkPartitionExists: the topic exists and has the partition.
func (s *Store) checkPartitionExists(ctx context.Context, id TopicID, partition int32) error {
	resp, err := s.get(ctx, s.keys.topicID(id))
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("%w: id %s", ErrTopicNotFound, id)
	}
	t, err := s.Topic(ctx, string(resp.Kvs[0].Value))
	if err != nil {
		return err
	}
	if t.ID != id {
		return fmt.Errorf("%w: id %s", ErrTopicNotFound, id)
	}
	if int(partition) >= len(t.Replicas) {
		return fmt.Errorf("%w: topic %q has %d partitions, not %d", ErrInvalidPartitions, t.Name, len(t.Replicas), partition+1)
	}
	return nil
}

// Snapshot reads topics, partition states, brokers and the tier manifest at
// one revision. To
// follow changes, Watch from Revision+1.
func (s *Store) Snapshot(ctx context.Context) (Snapshot, error) {
	tr, err := s.txn(ctx, nil, []clientv3.Op{
		clientv3.OpGet(s.keys.topics(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.partitions(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.brokers(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.tierRoot(), clientv3.WithPrefix()),
	})
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Revision: tr.Header.Revision, Partitions: map[TopicID][]PartitionState{}}
	snap.Topics = s.decodeTopics(tr.Responses[0].GetResponseRange().Kvs)
	byTopic := s.groupPartitionKVs(tr.Responses[1].GetResponseRange().Kvs)
	for _, t := range snap.Topics {
		snap.Partitions[t.ID] = s.statesOf(t, byTopic[t.ID])
	}
	snap.Brokers = s.decodeBrokers(tr.Responses[2].GetResponseRange().Kvs)
	snap.Tier, snap.TierLogStarts = s.decodeTierKVs(tr.Responses[3].GetResponseRange().Kvs)
	return snap, nil
}

// groupPartitionKVs splits partition keys by topic id.
func (s *Store) groupPartitionKVs(kvs []*mvccpb.KeyValue) map[TopicID][]*mvccpb.KeyValue {
	out := map[TopicID][]*mvccpb.KeyValue{}
	for _, kv := range kvs {
		id, _, err := parsePartitionKey(strings.TrimPrefix(string(kv.Key), s.keys.partitions()))
		if err != nil {
			s.log.Error("ignoring partition state", "key", string(kv.Key), "err", err)
			continue
		}
		out[id] = append(out[id], kv)
	}
	return out
}

// decodeTopics decodes topic kvs, logging and skipping bad ones.
func (s *Store) decodeTopics(kvs []*mvccpb.KeyValue) []Topic {
	topics := make([]Topic, 0, len(kvs))
	for _, kv := range kvs {
		name := strings.TrimPrefix(string(kv.Key), s.keys.topics())
		t, err := decodeTopic(name, kv.Value, kv.ModRevision)
		if err == nil && ValidateTopicName(name) != nil {
			err = fmt.Errorf("%w: illegal topic name %q", ErrCorrupt, name)
		}
		if err != nil {
			s.log.Error("ignoring topic record", "key", string(kv.Key), "err", err)
			continue
		}
		topics = append(topics, t)
	}
	return topics
}
