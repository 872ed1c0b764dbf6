package metadata

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Retention holds: what the consumer groups of topics with a retention
// hold (retention.hold.ms / retention.hold.bytes) still need. The broker
// coordinating a group publishes, for each such topic partition the group
// committed to, the committed offset and when it was committed; the leader
// of the partition reads every broker's record when it applies remote
// retention. One record per broker, under retention-holds/<nodeId>, a JSON
// array of RetentionHold, rewritten whole when it changes. A record of a
// broker that stopped coordinating (or died) ages out: a reader ignores
// holds whose commit is older than the offsets retention.

// MaxRetentionHolds bounds the holds one broker publishes.
const MaxRetentionHolds = 100_000

// RetentionHold is one group's committed offset on one partition.
type RetentionHold struct {
	TopicID   TopicID
	Partition int32
	Group     string
	Offset    int64
	CommitMs  int64 // when the group committed it, unix ms
}

// holdRecord is a RetentionHold's JSON:
//
//	{"topicId":"<topicId>","partition":0,"group":"g","offset":42,"commitMs":1700000000000}
type holdRecord struct {
	TopicID   string `json:"topicId"`
	Partition int32  `json:"partition"`
	Group     string `json:"group"`
	Offset    int64  `json:"offset"`
	CommitMs  int64  `json:"commitMs"`
}

func (k keys) retentionHoldRoot() string { return k.prefix + "retention-holds/" }

func (k keys) retentionHolds(node int32) string {
	return k.retentionHoldRoot() + strconv.FormatInt(int64(node), 10)
}

// PublishRetentionHolds replaces node's holds (an empty list deletes its
// record). Holds are sorted first, so an unchanged set writes the same
// bytes; callers skip a write whose bytes did not change.
func (s *Store) PublishRetentionHolds(ctx context.Context, node int32, holds []RetentionHold) error {
	if len(holds) > MaxRetentionHolds {
		return fmt.Errorf("%w: %d retention holds, want at most %d", ErrInvalidConfig, len(holds), MaxRetentionHolds)
	}
	key := s.keys.retentionHolds(node)
	if len(holds) == 0 {
		_, err := s.txn(ctx, nil, []clientv3.Op{clientv3.OpDelete(key)})
		return err
	}
	value, err := EncodeRetentionHolds(holds)
	if err != nil {
		return err
	}
	_, err = s.txn(ctx, nil, []clientv3.Op{clientv3.OpPut(key, string(value))})
	return err
}

// EncodeRetentionHolds is the record of holds, sorted by topic id,
// partition and group.
func EncodeRetentionHolds(holds []RetentionHold) ([]byte, error) {
	sorted := slices.Clone(holds)
	slices.SortFunc(sorted, func(a, b RetentionHold) int {
		if c := strings.Compare(a.TopicID.String(), b.TopicID.String()); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return strings.Compare(a.Group, b.Group)
	})
	records := make([]holdRecord, len(sorted))
	for i, h := range sorted {
		records[i] = holdRecord{TopicID: h.TopicID.String(), Partition: h.Partition, Group: h.Group, Offset: h.Offset, CommitMs: h.CommitMs}
	}
	return json.Marshal(records)
}

// decodeRetentionHolds parses one broker's record.
func decodeRetentionHolds(value []byte) ([]RetentionHold, error) {
	var records []holdRecord
	if err := json.Unmarshal(value, &records); err != nil {
		return nil, fmt.Errorf("%w: retention holds: %v", ErrCorrupt, err)
	}
	if len(records) > MaxRetentionHolds {
		return nil, fmt.Errorf("%w: %d retention holds, want at most %d", ErrCorrupt, len(records), MaxRetentionHolds)
	}
	out := make([]RetentionHold, len(records))
	for i, r := range records {
		id, err := ParseTopicID(r.TopicID)
		if err != nil {
			return nil, err
		}
		out[i] = RetentionHold{TopicID: id, Partition: r.Partition, Group: r.Group, Offset: r.Offset, CommitMs: r.CommitMs}
	}
	return out, nil
}

// RetentionHolds reads every broker's holds, by partition. Corrupt records
// are logged and skipped.
func (s *Store) RetentionHolds(ctx context.Context) (map[TierPartition][]RetentionHold, error) {
	resp, err := s.get(ctx, s.keys.retentionHoldRoot(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[TierPartition][]RetentionHold{}
	for _, kv := range resp.Kvs {
		holds, err := decodeRetentionHolds(kv.Value)
		if err != nil {
			s.log.Error("skipping corrupt retention hold record", "key", string(kv.Key), "err", err)
			continue
		}
		for _, h := range holds {
			k := TierPartition{TopicID: h.TopicID, Partition: h.Partition}
			out[k] = append(out[k], h)
		}
	}
	return out, nil
}
