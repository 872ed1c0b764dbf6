package metadata

// The tier manifest (DESIGN.md §5): one small etcd entry per segment object
// that reached the bucket, plus one optional per-partition log-start record
// that DeleteRecords and remote retention move up. See doc.go ("Tier
// manifest") for the keys, values and guards.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sentinel errors of the tier manifest.
var (
	// ErrTierEntryExists: an entry with the same base offset but another
	// object key is already committed (another upload of the segment won).
	ErrTierEntryExists = errors.New("metadata: tier entry exists with another key")
	// ErrTierEntryInvalid: an entry that cannot be committed (bad offsets, key).
	ErrTierEntryInvalid = errors.New("metadata: invalid tier entry")
)

// maxTierKeyLen bounds an entry's object key (S3's limit is 1024 bytes).
const maxTierKeyLen = 1024

// tierLogStartName is the last element of a partition's log-start key; it
// sorts after every 20-digit base offset.
const tierLogStartName = "log-start"

// TierEntry is one committed tiered segment:
// /strata/<cluster>/tier/<topicId>/<partition:05>/<baseOffset:020>.
type TierEntry struct {
	TopicID        TopicID `json:"-"`
	Partition      int32   `json:"-"`
	BaseOffset     int64   // first offset of the object's first batch
	LastOffset     int64   // last offset of the object's last batch
	FirstTimestamp int64   // firstTimestamp of the first batch
	MaxTimestamp   int64   // largest batch maxTimestamp
	LeaderEpoch    int32   // epoch of the last batch (for OffsetForLeaderEpoch)
	Key            string  // object key in the bucket
	Size           int64   // object size in bytes
	Version        int64   `json:"-"` // etcd mod revision
}

// TierPartition names one partition in the tier maps of Snapshot.
type TierPartition struct {
	TopicID   TopicID
	Partition int32
}

// tierRecord is the JSON of a tier entry.
type tierRecord struct {
	BaseOffset     int64  `json:"baseOffset"`
	LastOffset     int64  `json:"lastOffset"`
	FirstTimestamp int64  `json:"firstTimestamp"`
	MaxTimestamp   int64  `json:"maxTimestamp"`
	LeaderEpoch    int32  `json:"leaderEpoch"`
	Key            string `json:"key"`
	Size           int64  `json:"size"`
}

func (k keys) tierPartition(id TopicID, p int32) string {
	return fmt.Sprintf("%s%05d/", k.tier(id), p)
}

func (k keys) tierEntry(id TopicID, p int32, base int64) string {
	return fmt.Sprintf("%s%020d", k.tierPartition(id, p), base)
}

func (k keys) tierLogStart(id TopicID, p int32) string {
	return k.tierPartition(id, p) + tierLogStartName
}

func (k keys) tierRoot() string { return k.prefix + "tier/" }

func checkTierEntry(e TierEntry) error {
	switch {
	case e.TopicID.IsZero(), e.Partition < 0, e.Partition >= MaxPartitions:
		return fmt.Errorf("%w: topic %s partition %d", ErrTierEntryInvalid, e.TopicID, e.Partition)
	case e.BaseOffset < 0, e.LastOffset < e.BaseOffset:
		return fmt.Errorf("%w: offsets [%d, %d]", ErrTierEntryInvalid, e.BaseOffset, e.LastOffset)
	case e.Key == "", len(e.Key) > maxTierKeyLen, e.Size <= 0, e.LeaderEpoch < 0:
		return fmt.Errorf("%w: key %q size %d epoch %d", ErrTierEntryInvalid, e.Key, e.Size, e.LeaderEpoch)
	}
	return nil
}

func encodeTierEntry(e TierEntry) ([]byte, error) {
	if err := checkTierEntry(e); err != nil {
		return nil, err
	}
	return json.Marshal(tierRecord{BaseOffset: e.BaseOffset, LastOffset: e.LastOffset,
		FirstTimestamp: e.FirstTimestamp, MaxTimestamp: e.MaxTimestamp, LeaderEpoch: e.LeaderEpoch,
		Key: e.Key, Size: e.Size})
}

// decodeTierEntry decodes the value of the entry key for (id, p, base).
func decodeTierEntry(id TopicID, p int32, base int64, value []byte, rev int64) (TierEntry, error) {
	var rec tierRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return TierEntry{}, fmt.Errorf("%w: tier entry: %v", ErrCorrupt, err)
	}
	e := TierEntry{TopicID: id, Partition: p, BaseOffset: rec.BaseOffset, LastOffset: rec.LastOffset,
		FirstTimestamp: rec.FirstTimestamp, MaxTimestamp: rec.MaxTimestamp, LeaderEpoch: rec.LeaderEpoch,
		Key: rec.Key, Size: rec.Size, Version: rev}
	if err := checkTierEntry(e); err != nil || e.BaseOffset != base {
		return TierEntry{}, fmt.Errorf("%w: tier entry %s/%d/%d: %v (base %d)", ErrCorrupt, id, p, base, err, e.BaseOffset)
	}
	return e, nil
}

// parseTierKey splits "<topicId>/<partition:05>/<baseOffset:020>|log-start"
// (the part after tier/). logStart reports the log-start record.
func parseTierKey(rest string) (id TopicID, p int32, base int64, logStart bool, err error) {
	head, last, ok := cutLast(rest, "/")
	if !ok {
		return id, 0, 0, false, fmt.Errorf("%w: tier key %q", ErrCorrupt, rest)
	}
	if id, p, err = parsePartitionKey(head); err != nil {
		return id, 0, 0, false, err
	}
	if last == tierLogStartName {
		return id, p, 0, true, nil
	}
	n, perr := strconv.ParseInt(last, 10, 64)
	if perr != nil || len(last) != 20 || n < 0 {
		return id, 0, 0, false, fmt.Errorf("%w: tier key %q", ErrCorrupt, rest)
	}
	return id, p, n, false, nil
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// CommitTierEntry records e in the manifest, create-if-absent: if an entry
// with e's base offset exists and names the same Key, it returns nil (a
// retried commit); if it names another key, ErrTierEntryExists. The topic
// must still exist (ErrTopicNotFound), so an upload racing a topic delete
// leaves no entry behind. Returns nil on success; e.Version is not updated
// (callers that need it read TierEntries or wait for the watch).
func (s *Store) CommitTierEntry(ctx context.Context, e TierEntry) error {
	_, err := s.CommitTierEntryRev(ctx, e)
	return err
}

// CommitTierEntryRev is CommitTierEntry that also returns the entry's mod
// revision (its Version).
func (s *Store) CommitTierEntryRev(ctx context.Context, e TierEntry) (int64, error) {
	value, err := encodeTierEntry(e)
	if err != nil {
		return 0, err
	}
	key := s.keys.tierEntry(e.TopicID, e.Partition, e.BaseOffset)
	tr, err := s.txn(ctx,
		[]clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.keys.topicID(e.TopicID)), ">", 0),
		},
		[]clientv3.Op{clientv3.OpPut(key, string(value))},
		clientv3.OpGet(key), clientv3.OpGet(s.keys.topicID(e.TopicID), clientv3.WithCountOnly()))
	if err != nil {
		return 0, err
	}
	if tr.Succeeded {
		return tr.Header.Revision, nil
	}
	if tr.Responses[1].GetResponseRange().Count == 0 {
		return 0, fmt.Errorf("%w: id %s", ErrTopicNotFound, e.TopicID)
	}
	kvs := tr.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 1 {
		old, derr := decodeTierEntry(e.TopicID, e.Partition, e.BaseOffset, kvs[0].Value, kvs[0].ModRevision)
		if derr == nil && old.Key == e.Key {
			return old.Version, nil
		}
	}
	return 0, fmt.Errorf("%w: %s-%d base %d", ErrTierEntryExists, e.TopicID, e.Partition, e.BaseOffset)
}

// TierEntries lists a partition's committed entries, sorted by BaseOffset.
// Values that do not decode are logged and left out.
func (s *Store) TierEntries(ctx context.Context, id TopicID, partition int32) ([]TierEntry, error) {
	resp, err := s.get(ctx, s.keys.tierPartition(id, partition), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	entries, _ := s.decodeTierKVs(resp.Kvs)
	return entries, nil
}

// AllTierEntries lists every entry of the cluster, sorted by topic id,
// partition and base offset, with the per-partition log starts.
func (s *Store) AllTierEntries(ctx context.Context) ([]TierEntry, map[TierPartition]int64, error) {
	resp, err := s.get(ctx, s.keys.tierRoot(), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, err
	}
	entries, starts := s.decodeTierKVs(resp.Kvs)
	return entries, starts, nil
}

// decodeTierKVs decodes entries and log starts under tier/, in key order
// (which is topic id, partition, base offset order).
func (s *Store) decodeTierKVs(kvs []*mvccpb.KeyValue) ([]TierEntry, map[TierPartition]int64) {
	entries := make([]TierEntry, 0, len(kvs))
	starts := map[TierPartition]int64{}
	for _, kv := range kvs {
		id, p, base, isStart, err := parseTierKey(strings.TrimPrefix(string(kv.Key), s.keys.tierRoot()))
		if err == nil && isStart {
			var start int64
			if start, err = decodeCounter(kv.Value); err == nil {
				starts[TierPartition{id, p}] = start
				continue
			}
		}
		var e TierEntry
		if err == nil {
			e, err = decodeTierEntry(id, p, base, kv.Value, kv.ModRevision)
		}
		if err != nil {
			s.log.Error("ignoring tier manifest key", "key", string(kv.Key), "err", err)
			continue
		}
		entries = append(entries, e)
	}
	return entries, starts
}

// DeleteTierEntries removes entries of one partition in one transaction,
// each guarded by its Version (mod revision) when non-zero, so an entry
// replaced in between is not deleted. Entries already gone are not an error.
// A failed guard gives ErrCASFailed and deletes nothing.
func (s *Store) DeleteTierEntries(ctx context.Context, id TopicID, partition int32, entries []TierEntry) error {
	for start := 0; start < len(entries); start += maxTierTxnOps {
		batch := entries[start:min(len(entries), start+maxTierTxnOps)]
		if err := s.deleteTierBatch(ctx, id, partition, batch); err != nil {
			return err
		}
	}
	return nil
}

// maxTierTxnOps stays under etcd's default --max-txn-ops (128).
const maxTierTxnOps = 100

func (s *Store) deleteTierBatch(ctx context.Context, id TopicID, partition int32, entries []TierEntry) error {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	for _, e := range entries {
		key := s.keys.tierEntry(id, partition, e.BaseOffset)
		if e.Version != 0 {
			// Absent (mod revision 0) or unchanged.
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "<", e.Version+1))
		}
		ops = append(ops, clientv3.OpDelete(key))
	}
	tr, err := s.txn(ctx, cmps, ops)
	if err != nil {
		return err
	}
	if !tr.Succeeded {
		return fmt.Errorf("%w: tier entries of %s-%d changed", ErrCASFailed, id, partition)
	}
	return nil
}

// TierLogStart reads the partition's tiered log start (0 when never set):
// DeleteRecords and retention raise it; offsets below it are gone even
// where an object still holds them.
func (s *Store) TierLogStart(ctx context.Context, id TopicID, partition int32) (int64, error) {
	resp, err := s.get(ctx, s.keys.tierLogStart(id, partition))
	if err != nil || len(resp.Kvs) == 0 {
		return 0, err
	}
	return decodeCounter(resp.Kvs[0].Value)
}

// RaiseTierLogStart moves the partition's log start up to offset (never
// down; CAS loop). The topic must exist. Returns the stored value.
func (s *Store) RaiseTierLogStart(ctx context.Context, id TopicID, partition int32, offset int64) (int64, error) {
	key := s.keys.tierLogStart(id, partition)
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		resp, err := s.get(ctx, key)
		if err != nil {
			return 0, err
		}
		cur, modRev := int64(0), int64(0)
		if len(resp.Kvs) == 1 {
			if cur, err = decodeCounter(resp.Kvs[0].Value); err != nil {
				return 0, err
			}
			modRev = resp.Kvs[0].ModRevision
		}
		if offset <= cur {
			return cur, nil
		}
		tr, err := s.txn(ctx, []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(key), "=", modRev),
			clientv3.Compare(clientv3.CreateRevision(s.keys.topicID(id)), ">", 0),
		}, []clientv3.Op{clientv3.OpPut(key, strconv.FormatInt(offset, 10))})
		if err != nil {
			return 0, err
		}
		if tr.Succeeded {
			return offset, nil
		}
		if exists, err := s.topicIDExists(ctx, id); err != nil || !exists {
			return 0, errors.Join(err, fmt.Errorf("%w: id %s", ErrTopicNotFound, id))
		}
	}
	return 0, fmt.Errorf("%w: tier log start of %s-%d: too much contention", ErrCASFailed, id, partition)
}

func (s *Store) topicIDExists(ctx context.Context, id TopicID) (bool, error) {
	resp, err := s.get(ctx, s.keys.topicID(id), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

// tierEvent translates a watch event under tier/.
func (w *watcher) tierEvent(rest string, ev *clientv3.Event) (Event, bool) {
	id, p, base, isStart, err := parseTierKey(rest)
	if err != nil {
		w.s.log.Error("watch: ignoring tier key", "key", string(ev.Kv.Key), "err", err)
		return Event{}, false
	}
	rev := ev.Kv.ModRevision
	if isStart {
		if ev.Type == mvccpb.DELETE {
			return Event{}, false // only deleted with the whole topic
		}
		start, err := decodeCounter(ev.Kv.Value)
		if err != nil {
			w.s.log.Error("watch: ignoring tier log start", "key", string(ev.Kv.Key), "err", err)
			return Event{}, false
		}
		return Event{Kind: TierLogStartPut, TopicID: id, Partition: p, TierLogStart: start, Revision: rev}, true
	}
	if ev.Type == mvccpb.DELETE {
		e := TierEntry{TopicID: id, Partition: p, BaseOffset: base, LastOffset: base}
		if ev.PrevKv != nil {
			if old, err := decodeTierEntry(id, p, base, ev.PrevKv.Value, ev.PrevKv.ModRevision); err == nil {
				e = old
			}
		}
		return Event{Kind: TierDeleted, TopicID: id, Partition: p, Tier: &e, Revision: rev}, true
	}
	e, err := decodeTierEntry(id, p, base, ev.Kv.Value, rev)
	if err != nil {
		w.s.log.Error("watch: ignoring tier entry", "key", string(ev.Kv.Key), "err", err)
		return Event{}, false
	}
	return Event{Kind: TierPut, TopicID: id, Partition: p, Tier: &e, Revision: rev}, true
}
