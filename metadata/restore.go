package metadata

// Restoring a topic from the bucket (`strata restore`, DESIGN.md §8): the
// topic record with a given id, its partition states (a diskless topic: its
// diskless heads instead) and its tier manifest, written so that a broker
// never sees the topic before its manifest and heads.

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// restoreOpsPerTxn keeps every restore transaction under etcd's default
// --max-txn-ops (128).
const restoreOpsPerTxn = 100

// RestoreTopicRequest describes a topic rebuilt from the bucket.
type RestoreTopicRequest struct {
	Topic Topic // Name, ID (non-zero), Replicas, Configs; Internal is ignored (restored topics are never internal)
	// LeaderEpochs[p] is the epoch partition p's state starts at: larger
	// than every leader epoch in its restored objects, so that batches
	// produced after the restore carry larger epochs. Classic topics only:
	// a diskless topic has no partition states (ignored).
	LeaderEpochs []int32
	// DisklessHeads[p] is partition p's diskless head, for a diskless
	// topic (Topic.Diskless(), with DisklessAssignment's empty replica
	// lists) only, one per partition. Opaque here: package diskless owns
	// its JSON (diskless.RestoredHead).
	DisklessHeads [][]byte
	// Entries are the manifest entries of every partition.
	Entries []TierEntry
	// LogStarts[p], when present, is written as partition p's tier log
	// start (the first restored offset, if the first entry starts below it).
	LogStarts map[int32]int64
}

func (r RestoreTopicRequest) validate() error {
	if err := ValidateTopicName(r.Topic.Name); err != nil {
		return err
	}
	if r.Topic.ID.IsZero() {
		return fmt.Errorf("%w: restore of %q without a topic id", ErrInvalidPartitions, r.Topic.Name)
	}
	if err := ValidateTopicConfigs(r.Topic.Configs); err != nil {
		return err
	}
	if err := r.validateShape(); err != nil {
		return err
	}
	for _, e := range r.Entries {
		if e.TopicID != r.Topic.ID || int(e.Partition) >= len(r.Topic.Replicas) {
			return fmt.Errorf("%w: entry of %s partition %d in the restore of %s", ErrTierEntryInvalid, e.TopicID, e.Partition, r.Topic.ID)
		}
		if err := checkTierEntry(e); err != nil {
			return err
		}
	}
	return nil
}

// validateShape checks what depends on the topic's kind: a classic topic's
// replica lists and leader epochs, a diskless topic's empty lists and
// heads.
func (r RestoreTopicRequest) validateShape() error {
	diskless := r.Topic.Diskless()
	if err := validateTopicAssignment(r.Topic.Replicas, diskless); err != nil {
		return err
	}
	if !diskless {
		if len(r.DisklessHeads) > 0 {
			return fmt.Errorf("%w: diskless heads in the restore of classic topic %q", ErrInvalidPartitions, r.Topic.Name)
		}
		if len(r.LeaderEpochs) != len(r.Topic.Replicas) {
			return fmt.Errorf("%w: %d leader epochs for %d partitions", ErrInvalidPartitions, len(r.LeaderEpochs), len(r.Topic.Replicas))
		}
		return nil
	}
	if len(r.DisklessHeads) != len(r.Topic.Replicas) {
		return fmt.Errorf("%w: %d diskless heads for %d partitions", ErrInvalidPartitions, len(r.DisklessHeads), len(r.Topic.Replicas))
	}
	for p, head := range r.DisklessHeads {
		if len(head) == 0 || len(head) > MaxDisklessValueBytes {
			return fmt.Errorf("%w: diskless head of partition %d: %d bytes", ErrInvalidPartitions, p, len(head))
		}
	}
	return nil
}

// RestoreTopic creates a topic with the request's id, partition states at
// the given epochs, and its tier manifest. The manifest goes first, in
// transactions guarded by "neither the name nor the id exists", then the
// topic record, its id index and the partition states in one transaction
// with the same guard: a broker that sees the topic sees its whole
// manifest, and a rerun after a failure rewrites the same entries. A
// diskless topic's heads go with its manifest, before the topic record
// (a broker that sees the topic never commits at an offset below its
// head), and it gets no partition states.
// ErrTopicExists when the name or the id is taken (the id: a previous
// restore of the same incarnation completed).
func (s *Store) RestoreTopic(ctx context.Context, req RestoreTopicRequest) (Topic, error) {
	if err := req.validate(); err != nil {
		return Topic{}, err
	}
	t := Topic{Name: req.Topic.Name, ID: req.Topic.ID, Replicas: cloneAssignment(req.Topic.Replicas),
		Configs: cloneConfigs(req.Topic.Configs)}
	absent := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.keys.topic(t.Name)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.keys.topicID(t.ID)), "=", 0),
	}
	manifest, err := s.restoreManifestOps(req)
	if err != nil {
		return Topic{}, err
	}
	for len(manifest) > 0 {
		n := min(len(manifest), restoreOpsPerTxn)
		if err := s.restoreTxn(ctx, t, absent, manifest[:n]); err != nil {
			return Topic{}, err
		}
		manifest = manifest[n:]
	}
	topicOps, stateOps, err := s.restoreTopicOps(t, req.LeaderEpochs)
	if err != nil {
		return Topic{}, err
	}
	n := min(len(stateOps), restoreOpsPerTxn)
	if err := s.restoreTxn(ctx, t, absent, append(topicOps, stateOps[:n]...)); err != nil {
		return Topic{}, err
	}
	// Partitions beyond the first transaction: the topic exists now, so
	// guard on its id instead (a delete in between leaves no state behind).
	exists := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.keys.topicID(t.ID)), ">", 0)}
	for rest := stateOps[n:]; len(rest) > 0; {
		n := min(len(rest), restoreOpsPerTxn)
		if err := s.restoreTxn(ctx, t, exists, rest[:n]); err != nil {
			return Topic{}, err
		}
		rest = rest[n:]
	}
	return s.Topic(ctx, t.Name)
}

func (s *Store) restoreTxn(ctx context.Context, t Topic, guard []clientv3.Cmp, ops []clientv3.Op) error {
	tr, err := s.txn(ctx, guard, ops)
	if err != nil {
		return err
	}
	if !tr.Succeeded {
		return fmt.Errorf("%w: %q or its id %s", ErrTopicExists, t.Name, t.ID)
	}
	return nil
}

func (s *Store) restoreManifestOps(req RestoreTopicRequest) ([]clientv3.Op, error) {
	ops := make([]clientv3.Op, 0, len(req.Entries)+len(req.LogStarts)+len(req.DisklessHeads))
	for _, e := range req.Entries {
		value, err := encodeTierEntry(e)
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(s.keys.tierEntry(e.TopicID, e.Partition, e.BaseOffset), string(value)))
	}
	for p, start := range req.LogStarts {
		if p < 0 || int(p) >= len(req.Topic.Replicas) || start < 0 {
			return nil, fmt.Errorf("%w: log start %d of partition %d", ErrTierEntryInvalid, start, p)
		}
		ops = append(ops, clientv3.OpPut(s.keys.tierLogStart(req.Topic.ID, p), strconv.FormatInt(start, 10)))
	}
	for p, head := range req.DisklessHeads {
		tp := TierPartition{TopicID: req.Topic.ID, Partition: int32(p)}
		ops = append(ops, clientv3.OpPut(s.keys.disklessHead(tp), string(head)))
	}
	return ops, nil
}

func (s *Store) restoreTopicOps(t Topic, epochs []int32) (topic, states []clientv3.Op, err error) {
	value, err := encodeTopic(t)
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: encode topic: %w", err)
	}
	topic = []clientv3.Op{clientv3.OpPut(s.keys.topic(t.Name), string(value)), clientv3.OpPut(s.keys.topicID(t.ID), t.Name)}
	if t.Diskless() {
		return topic, nil, nil // no partition states, ever
	}
	for p, replicas := range t.Replicas {
		st := initialPartitionState(replicas)
		st.LeaderEpoch = max(epochs[p], 0)
		v, err := encodePartitionState(st)
		if err != nil {
			return nil, nil, err
		}
		states = append(states, clientv3.OpPut(s.keys.partition(t.ID, int32(p)), string(v)))
	}
	return topic, states, nil
}

// NewTopicID returns a fresh random topic id (a restored incarnation's).
func NewTopicID() (TopicID, error) { return newTopicID() }

// RaiseNextProducerID makes the producer-id allocator hand out only ids at
// or above floor (a restore's producers keep theirs). Never lowers it.
func (s *Store) RaiseNextProducerID(ctx context.Context, floor int64) error {
	key := s.keys.producerIDs()
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		resp, err := s.get(ctx, key)
		if err != nil {
			return err
		}
		next, modRev := int64(0), int64(0)
		if len(resp.Kvs) == 1 {
			if next, err = decodeCounter(resp.Kvs[0].Value); err != nil {
				return err
			}
			modRev = resp.Kvs[0].ModRevision
		}
		if next >= floor {
			return nil
		}
		tr, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)},
			[]clientv3.Op{clientv3.OpPut(key, strconv.FormatInt(floor, 10))})
		if err != nil {
			return err
		}
		if tr.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("%w: producer id counter: too much contention", ErrCASFailed)
}
