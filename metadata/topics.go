package metadata

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CreateTopic writes the topic record and its id index in one transaction
// guarded by "topic key absent" (ErrTopicExists otherwise). Partition states
// start as their initial state (doc.go): leader = first replica, epoch 0,
// ISR = replicas. A diskless topic (diskless.enable=true) has one empty
// replica list per partition (DisklessAssignment) and no partition states
// ever. The topic gets a fresh random id.
func (s *Store) CreateTopic(ctx context.Context, req CreateTopicRequest) (Topic, error) {
	if err := ValidateTopicName(req.Name); err != nil {
		return Topic{}, err
	}
	if err := ValidateTopicConfigs(req.Configs); err != nil {
		return Topic{}, err
	}
	if err := validateTopicAssignment(req.Replicas, DisklessConfigs(req.Configs)); err != nil {
		return Topic{}, err
	}
	id, err := newTopicID()
	if err != nil {
		return Topic{}, err
	}
	t := Topic{
		Name:     req.Name,
		ID:       id,
		Internal: req.Internal,
		Replicas: cloneAssignment(req.Replicas),
		Configs:  cloneConfigs(req.Configs),
	}
	value, err := encodeTopic(t)
	if err != nil {
		return Topic{}, fmt.Errorf("metadata: encode topic: %w", err)
	}
	key := s.keys.topic(t.Name)
	tr, err := s.txn(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(value)), clientv3.OpPut(s.keys.topicID(id), t.Name)})
	if err != nil {
		return Topic{}, err
	}
	if !tr.Succeeded {
		return Topic{}, fmt.Errorf("%w: %q", ErrTopicExists, t.Name)
	}
	t.Revision = tr.Header.Revision
	return t, nil
}

// DeleteTopic removes the topic, its id index, its partition states, its
// tier manifest and its diskless heads and runs in one transaction (CAS on the topic's revision, retried if a
// concurrent alter got in between), and records the id under
// deleted-topics/ (value: unix ms of the deletion), so the orphan sweeper
// can tell a deleted topic's objects from those of an id etcd never knew
// (a lost index that `strata restore` can rebuild).
func (s *Store) DeleteTopic(ctx context.Context, name string) error {
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		t, err := s.Topic(ctx, name)
		if err != nil {
			return err
		}
		key := s.keys.topic(name)
		tr, err := s.txn(ctx,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision)},
			[]clientv3.Op{
				clientv3.OpDelete(key),
				clientv3.OpDelete(s.keys.topicID(t.ID)),
				clientv3.OpDelete(s.keys.partitionsOf(t.ID), clientv3.WithPrefix()),
				clientv3.OpDelete(s.keys.tier(t.ID), clientv3.WithPrefix()),
				clientv3.OpDelete(s.keys.disklessHeads()+t.ID.String()+"/", clientv3.WithPrefix()),
				clientv3.OpDelete(s.keys.disklessRuns()+t.ID.String()+"/", clientv3.WithPrefix()),
				clientv3.OpPut(s.keys.deletedTopic(t.ID), strconv.FormatInt(time.Now().UnixMilli(), 10)),
			})
		if err != nil {
			return err
		}
		if tr.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("%w: delete topic %q: too much contention", ErrCASFailed, name)
}

// TopicIDKnown reports whether id is a live topic (topic-ids/<id> exists)
// and whether it was deleted (deleted-topics/<id> exists), read in one
// transaction. Both false: etcd never knew the id (or its index was lost).
func (s *Store) TopicIDKnown(ctx context.Context, id TopicID) (live, deleted bool, err error) {
	tr, err := s.txn(ctx, nil, []clientv3.Op{
		clientv3.OpGet(s.keys.topicID(id), clientv3.WithCountOnly()),
		clientv3.OpGet(s.keys.deletedTopic(id), clientv3.WithCountOnly()),
	})
	if err != nil {
		return false, false, err
	}
	if len(tr.Responses) != 2 {
		return false, false, fmt.Errorf("%w: topic id lookup: %d responses", ErrCorrupt, len(tr.Responses))
	}
	live = tr.Responses[0].GetResponseRange().GetCount() > 0
	deleted = tr.Responses[1].GetResponseRange().GetCount() > 0
	return live, deleted, nil
}

// Topic reads one topic; ErrTopicNotFound if absent (or not a legal name).
func (s *Store) Topic(ctx context.Context, name string) (Topic, error) {
	if ValidateTopicName(name) != nil {
		return Topic{}, fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	resp, err := s.get(ctx, s.keys.topic(name))
	if err != nil {
		return Topic{}, err
	}
	if len(resp.Kvs) == 0 {
		return Topic{}, fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	kv := resp.Kvs[0]
	return decodeTopic(name, kv.Value, kv.ModRevision)
}

// Topics lists all topics in name order. A record that does not decode is
// logged and left out, so one bad value cannot hide every other topic.
func (s *Store) Topics(ctx context.Context) ([]Topic, error) {
	resp, err := s.get(ctx, s.keys.topics(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	return s.decodeTopics(resp.Kvs), nil
}

// AlterTopicConfigs applies mutate to a copy of the topic's override map and
// writes it back with a CAS on the topic's revision, retrying on conflict:
// mutate may run more than once and must depend only on its argument. The
// result must pass ValidateTopicConfigChange against the stored overrides
// (ErrInvalidConfig otherwise: invalid, or diskless.enable changed); an
// error from mutate is returned as is. Nothing is written on an error.
func (s *Store) AlterTopicConfigs(ctx context.Context, name string, mutate func(map[string]string) error) (Topic, error) {
	return s.updateTopic(ctx, name, func(t *Topic) error {
		before := maps.Clone(t.Configs)
		if err := mutate(t.Configs); err != nil {
			return err
		}
		return ValidateTopicConfigChange(before, t.Configs)
	})
}

// AddPartitions appends partitions with the given replica lists (CAS on the
// topic's revision, retried on conflict). The new partitions start in their
// initial state; a diskless topic's new lists must be empty.
func (s *Store) AddPartitions(ctx context.Context, name string, replicas [][]int32) (Topic, error) {
	if len(replicas) == 0 {
		return Topic{}, fmt.Errorf("%w: no partitions to add", ErrInvalidPartitions)
	}
	return s.updateTopic(ctx, name, func(t *Topic) error {
		t.Replicas = append(t.Replicas, cloneAssignment(replicas)...)
		return validateTopicAssignment(t.Replicas, t.Diskless())
	})
}

// updateTopic is the CAS loop shared by topic updates: read, change a copy,
// write if the topic key's ModRevision is still the one read.
func (s *Store) updateTopic(ctx context.Context, name string, change func(*Topic) error) (Topic, error) {
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		t, err := s.Topic(ctx, name)
		if err != nil {
			return Topic{}, err
		}
		if err := change(&t); err != nil {
			return Topic{}, err
		}
		value, err := encodeTopic(t)
		if err != nil {
			return Topic{}, fmt.Errorf("metadata: encode topic: %w", err)
		}
		key := s.keys.topic(name)
		tr, err := s.txn(ctx,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision)},
			[]clientv3.Op{clientv3.OpPut(key, string(value))})
		if err != nil {
			return Topic{}, err
		}
		if tr.Succeeded {
			t.Revision = tr.Header.Revision
			return t, nil
		}
	}
	return Topic{}, fmt.Errorf("%w: topic %q: too much contention", ErrCASFailed, name)
}

func cloneAssignment(replicas [][]int32) [][]int32 {
	out := make([][]int32, len(replicas))
	for i, list := range replicas {
		out[i] = slices.Clone(list)
	}
	return out
}

func cloneConfigs(configs map[string]string) map[string]string {
	if configs == nil {
		return map[string]string{}
	}
	return maps.Clone(configs)
}
