package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/metadata"
)

// ErrRestore: a restore request this broker refuses (bad request, topic
// exists, no room for the replication factor).
var ErrRestore = errors.New("broker: restore")

// RestoreTopicRequest is a topic rebuilt from the bucket by `strata
// restore` (cmd/strata/restore.go plans it with tier.RestorePartitionPlan).
// It is also the JSON body of POST /v1/restore/topic.
type RestoreTopicRequest struct {
	Name       string            `json:"name"`
	TopicID    string            `json:"topicId"` // Kafka string form
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// ReplicationFactor: -1 places min(3, live brokers) replicas.
	ReplicationFactor int16 `json:"replicationFactor"`
	// LeaderEpochs[p]: partition p starts leading at this epoch or later.
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
	mreq, err := restoreRequest(req, b.liveBrks.view())
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
	b.parts.awaitLeaders(ctx, t.ID, 0, leaderElectionWait, &b.liveBrks, b.log)
	b.log.Info("topic restored from the bucket", "topic", t.Name, "topic_id", t.ID.String(),
		"partitions", len(t.Replicas), "entries", len(mreq.Entries))
	return RestoreResult{Name: t.Name, TopicID: t.ID.String(), Partitions: int32(len(t.Replicas)), Replicas: t.Replicas}, nil
}

// restoreRequest checks req and places its replicas.
func restoreRequest(req RestoreTopicRequest, view brokerView) (metadata.RestoreTopicRequest, error) {
	id, err := metadata.ParseTopicID(req.TopicID)
	switch {
	case err != nil || id.IsZero():
		return metadata.RestoreTopicRequest{}, fmt.Errorf("%w: topic id %q", ErrRestore, req.TopicID)
	case req.Name == group.OffsetsTopic || req.Name == txn.TopicName:
		return metadata.RestoreTopicRequest{}, fmt.Errorf("%w: %s is internal: its brokers create it", ErrRestore, req.Name)
	case len(req.Entries) > maxRestoreEntries:
		return metadata.RestoreTopicRequest{}, fmt.Errorf("%w: %d entries (at most %d)", ErrRestore, len(req.Entries), maxRestoreEntries)
	}
	rf := req.ReplicationFactor
	if rf == -1 {
		rf = int16(min(3, len(view.list)))
	}
	replicas, code, msg := placeReplicas(topicSpec{name: req.Name, partitions: req.Partitions, replicationFactor: rf}, view)
	if code != 0 {
		return metadata.RestoreTopicRequest{}, fmt.Errorf("%w: %s", ErrRestore, msg)
	}
	out := metadata.RestoreTopicRequest{
		Topic:        metadata.Topic{Name: req.Name, ID: id, Replicas: replicas, Configs: maps.Clone(req.Configs)},
		LeaderEpochs: req.LeaderEpochs,
		LogStarts:    req.LogStarts,
	}
	for _, e := range req.Entries {
		out.Entries = append(out.Entries, metadata.TierEntry{TopicID: id, Partition: e.Partition,
			BaseOffset: e.BaseOffset, LastOffset: e.LastOffset, FirstTimestamp: e.FirstTimestamp,
			MaxTimestamp: e.MaxTimestamp, LeaderEpoch: e.LeaderEpoch, Key: e.Key, Size: e.Size})
	}
	return out, nil
}
