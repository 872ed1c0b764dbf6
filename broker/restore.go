package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/diskless"
	"github.com/strata-log/strata/metadata"
)

// ErrRestore: a restore request this broker refuses (bad request, topic
// exists, no room for the replication factor).
var ErrRestore = errors.New("broker: restore")

// RestoreTopicRequest is a topic rebuilt from the bucket by `strata
// restore` (cmd/strata/restore.go plans it with tier.RestorePartitionPlan).
// It is also the JSON body of POST /v1/restore/topic.
//
// A topic whose Configs say diskless.enable=true is rebuilt as a diskless
// topic: empty replica lists, no partition states, and per partition a
// diskless head at the restored range, [log start, one past the last
// entry's last offset), so that produces go on after it.
type RestoreTopicRequest struct {
	Name       string            `json:"name"`
	TopicID    string            `json:"topicId"` // Kafka string form
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// ReplicationFactor: -1 places min(3, live brokers) replicas. Ignored
	// for a diskless topic, which has none.
	ReplicationFactor int16 `json:"replicationFactor"`
	// LeaderEpochs[p]: partition p starts leading at this epoch or later.
	// Ignored for a diskless topic (no elections).
	LeaderEpochs []int32         `json:"leaderEpochs"`
	Entries      []RestoreEntry  `json:"entries"`
	LogStarts    map[int32]int64 `json:"logStarts,omitempty"`
	// NextProducerID: producer ids below it are taken by the restored
	// producer state; the cluster allocates from here on.
	NextProducerID int64 `json:"nextProducerId,omitempty"`
}

// RestoreEntry is one manifest entry of a RestoreTopicRequest.
type RestoreEntry struct {
	Partition      int32  `json:"partition"`
	BaseOffset     int64  `json:"baseOffset"`
	LastOffset     int64  `json:"lastOffset"`
	FirstTimestamp int64  `json:"firstTimestamp"`
	MaxTimestamp   int64  `json:"maxTimestamp"`
	LeaderEpoch    int32  `json:"leaderEpoch"`
	Key            string `json:"key"`
	Size           int64  `json:"size"`
}

// RestoreResult answers a restore: the topic as created.
type RestoreResult struct {
	Name       string    `json:"name"`
	TopicID    string    `json:"topicId"`
	Partitions int32     `json:"partitions"`
	Replicas   [][]int32 `json:"replicas"`
}

// maxRestoreEntries bounds one request (about 200 bytes of JSON each).
const maxRestoreEntries = 1 << 20

// RestoreTopic creates a topic with the request's id, leader epochs and
// tier manifest (metadata.RestoreTopic), then opens it here and waits
// briefly for its leaders. The in-memory manifest learns the entries
// before the partitions open, so a leader with an empty disk starts its
// log at the manifest's end (never at 0 below tiered data). Other brokers
// learn the entries first too: the watch delivers them in revision order.
func (b *Broker) RestoreTopic(ctx context.Context, req RestoreTopicRequest) (RestoreResult, error) {
	mreq, ranges, err := restoreRequest(req, b.liveBrks.view())
	if err != nil {
		return RestoreResult{}, err
	}
	if err := b.pids.Reserve(ctx, req.NextProducerID); err != nil {
		return RestoreResult{}, err
	}
	t, err := b.store.RestoreTopic(ctx, mreq)
	if err != nil {
		return RestoreResult{}, err
	}
	for _, e := range mreq.Entries {
		b.manifest.Committed(e)
	}
	for p, start := range mreq.LogStarts {
		b.manifest.SetLogStart(t.ID, p, start)
	}
	if _, err := b.loadTopicLocally(ctx, t.Name); err != nil {
		return RestoreResult{}, err
	}
	if t.Diskless() {
		b.awaitDisklessHeads(ctx, t.ID, ranges, leaderElectionWait)
	} else {
		b.parts.awaitLeaders(ctx, t.ID, 0, leaderElectionWait, &b.liveBrks, b.log)
	}
	b.log.Info("topic restored from the bucket", "topic", t.Name, "topic_id", t.ID.String(),
		"partitions", len(t.Replicas), "entries", len(mreq.Entries), "diskless", t.Diskless())
	return RestoreResult{Name: t.Name, TopicID: t.ID.String(), Partitions: int32(len(t.Replicas)), Replicas: t.Replicas}, nil
}

// restoreRequest checks req and places its replicas; a diskless topic
// gets none and a head per partition instead, whose ranges it returns
// (nil for a classic topic).
func restoreRequest(req RestoreTopicRequest, view brokerView) (metadata.RestoreTopicRequest, []restoredRange, error) {
	id, err := metadata.ParseTopicID(req.TopicID)
	switch {
	case err != nil || id.IsZero():
		return metadata.RestoreTopicRequest{}, nil, fmt.Errorf("%w: topic id %q", ErrRestore, req.TopicID)
	case req.Name == group.OffsetsTopic || req.Name == txn.TopicName:
		return metadata.RestoreTopicRequest{}, nil, fmt.Errorf("%w: %s is internal: its brokers create it", ErrRestore, req.Name)
	case len(req.Entries) > maxRestoreEntries:
		return metadata.RestoreTopicRequest{}, nil, fmt.Errorf("%w: %d entries (at most %d)", ErrRestore, len(req.Entries), maxRestoreEntries)
	}
	out := metadata.RestoreTopicRequest{
		Topic:        metadata.Topic{Name: req.Name, ID: id, Configs: maps.Clone(req.Configs)},
		LeaderEpochs: req.LeaderEpochs,
		LogStarts:    req.LogStarts,
	}
	for _, e := range req.Entries {
		out.Entries = append(out.Entries, metadata.TierEntry{TopicID: id, Partition: e.Partition,
			BaseOffset: e.BaseOffset, LastOffset: e.LastOffset, FirstTimestamp: e.FirstTimestamp,
			MaxTimestamp: e.MaxTimestamp, LeaderEpoch: e.LeaderEpoch, Key: e.Key, Size: e.Size})
	}
	if out.Topic.Diskless() {
		ranges, err := restoreDiskless(&out, req.Partitions)
		return out, ranges, err
	}
	rf := req.ReplicationFactor
	if rf == -1 {
		rf = int16(min(3, len(view.list)))
	}
	replicas, code, msg := placeReplicas(topicSpec{name: req.Name, partitions: req.Partitions, replicationFactor: rf}, view)
	if code != 0 {
		return metadata.RestoreTopicRequest{}, nil, fmt.Errorf("%w: %s", ErrRestore, msg)
	}
	out.Topic.Replicas = replicas
	return out, nil, nil
}

// restoredRange is a restored diskless partition's offsets [start, next).
type restoredRange struct{ start, next int64 }

// restoreDiskless gives a diskless topic's restore its empty replica
// lists and its heads: per partition, the log start is LogStarts' (else
// its first entry's base), the next offset one past its last entry's last
// offset, and a partition without entries is empty at 0. The merge wrote
// every entry from runs that left no gap, and nothing is after them: the
// records of unmerged runs are not in the bucket's segment objects.
// LogStarts are dropped, the heads hold them (DeleteRecords raises a
// diskless partition's log start in its head only), and so are the
// leader epochs (no elections).
func restoreDiskless(out *metadata.RestoreTopicRequest, partitions int32) ([]restoredRange, error) {
	if partitions < 1 || partitions > maxPartitions {
		return nil, fmt.Errorf("%w: %d partitions, want 1..%d", ErrRestore, partitions, maxPartitions)
	}
	out.Topic.Replicas = metadata.DisklessAssignment(int(partitions))
	ranges := make([]restoredRange, partitions)
	seen := make([]bool, partitions)
	for _, e := range out.Entries {
		p := e.Partition
		switch {
		case p < 0 || p >= partitions:
			continue // metadata.RestoreTopic refuses the request
		case !seen[p]:
			ranges[p], seen[p] = restoredRange{start: e.BaseOffset, next: e.LastOffset + 1}, true
		default:
			ranges[p].start, ranges[p].next = min(ranges[p].start, e.BaseOffset), max(ranges[p].next, e.LastOffset+1)
		}
	}
	for p, start := range out.LogStarts {
		if p >= 0 && p < partitions && seen[p] {
			ranges[p].start = min(max(ranges[p].start, start), ranges[p].next)
		}
	}
	for p, r := range ranges {
		head, err := diskless.RestoredHead(r.start, r.next)
		if err != nil {
			return nil, fmt.Errorf("%w: partition %d: %v", ErrRestore, p, err)
		}
		out.DisklessHeads = append(out.DisklessHeads, head)
	}
	out.LogStarts, out.LeaderEpochs = nil, nil
	return ranges, nil
}

// awaitDisklessHeads waits, at most wait, until this broker's diskless
// index holds the restored heads (it follows etcd's watch), so that the
// first ListOffsets or Fetch through it after the restore answers sees the
// restored range. Other brokers learn them through their own watch.
func (b *Broker) awaitDisklessHeads(ctx context.Context, id metadata.TopicID, ranges []restoredRange, wait time.Duration) {
	if b.diskless == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for p, r := range ranges {
		tp := metadata.TierPartition{TopicID: id, Partition: int32(p)}
		for {
			start, next, changed := b.diskless.index.Positions(tp)
			if start >= r.start && next >= r.next {
				break
			}
			select {
			case <-ctx.Done():
				b.log.Warn("restored diskless heads not seen yet; clients will catch up", "topic_id", id.String(), "partition", p)
				return
			case <-changed:
			}
		}
	}
}
