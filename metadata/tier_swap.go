package metadata

// Tier manifest swap (tiered compaction): a contiguous run of
// entries is replaced by the entries of the rewritten objects in one etcd
// transaction. See doc.go ("Writes and their guards", "Tier manifest").

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrTierEntriesChanged: SwapTierEntries found an old entry changed or gone,
// or a new entry's key taken; nothing was written.
var ErrTierEntriesChanged = errors.New("metadata: tier entries changed")

// SwapTierEntries replaces olds by news in one transaction. See
// SwapTierEntriesRev.
func (s *Store) SwapTierEntries(ctx context.Context, olds, news []TierEntry) error {
	_, err := s.SwapTierEntriesRev(ctx, olds, news)
	return err
}

// SwapTierEntriesRev replaces the contiguous run olds (sorted by
// BaseOffset, each olds[i+1].BaseOffset == olds[i].LastOffset+1, Versions
// as read) by news (sorted, contiguous the same way) covering exactly the
// same offsets: news[0].BaseOffset == olds[0].BaseOffset and the last
// LastOffsets are equal. A new entry may reuse an old entry's base offset
// (its key is overwritten, not deleted). It returns the revision of the
// transaction, which is every new entry's Version.
//
// The transaction is guarded by each old entry's mod revision (== its
// Version), by every new key not reusing an old one being absent, and by
// the topic existing. A failed guard gives ErrTierEntriesChanged
// (ErrTopicNotFound when the topic is gone) and writes nothing, except
// when the manifest already holds exactly news and none of the olds (a
// retry of a swap whose answer was lost): that is success.
//
// Operation order (the watch delivers one event per operation, in this
// order, all at one revision): puts of new keys, puts over reused keys,
// then deletes of the olds not reused. Every prefix of that sequence
// leaves the run's offsets covered (by olds, news or both), so a consumer
// applying the events one by one (tier.Manifest) never sees a gap.
//
// REQUIRES: len(olds)+len(news) <= MaxTierSwapEntries.
func (s *Store) SwapTierEntriesRev(ctx context.Context, olds, news []TierEntry) (int64, error) {
	if err := checkTierSwap(olds, news); err != nil {
		return 0, err
	}
	cmps, ops, err := s.tierSwapOps(olds, news)
	if err != nil {
		return 0, err
	}
	id, p := olds[0].TopicID, olds[0].Partition
	tr, err := s.txn(ctx, cmps, ops,
		clientv3.OpGet(s.keys.tierPartition(id, p), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.topicID(id), clientv3.WithCountOnly()))
	if err != nil {
		return 0, err
	}
	if tr.Succeeded {
		return tr.Header.Revision, nil
	}
	if tr.Responses[1].GetResponseRange().Count == 0 {
		return 0, fmt.Errorf("%w: id %s", ErrTopicNotFound, id)
	}
	current, _ := s.decodeTierKVs(tr.Responses[0].GetResponseRange().Kvs)
	if rev, ok := swapAlreadyApplied(current, olds, news); ok {
		return rev, nil
	}
	return 0, fmt.Errorf("%w: %s-%d [%d, %d]", ErrTierEntriesChanged, id, p,
		olds[0].BaseOffset, olds[len(olds)-1].LastOffset)
}

// MaxTierSwapEntries bounds olds plus news of one swap, so the transaction
// stays under etcd's default --max-txn-ops (128).
const MaxTierSwapEntries = maxTierTxnOps

// checkTierSwap validates the shape of a swap (see SwapTierEntriesRev).
func checkTierSwap(olds, news []TierEntry) error {
	if len(olds) == 0 || len(news) == 0 || len(olds)+len(news) > MaxTierSwapEntries {
		return fmt.Errorf("%w: swap of %d entries by %d", ErrTierEntryInvalid, len(olds), len(news))
	}
	id, p := olds[0].TopicID, olds[0].Partition
	for _, run := range [][]TierEntry{olds, news} {
		for i, e := range run {
			if err := checkTierEntry(e); err != nil {
				return err
			}
			if e.TopicID != id || e.Partition != p {
				return fmt.Errorf("%w: swap mixes partitions", ErrTierEntryInvalid)
			}
			if i > 0 && e.BaseOffset != run[i-1].LastOffset+1 {
				return fmt.Errorf("%w: swap run not contiguous at %d", ErrTierEntryInvalid, e.BaseOffset)
			}
		}
	}
	for _, e := range olds {
		if e.Version <= 0 {
			return fmt.Errorf("%w: old entry %d without a version", ErrTierEntryInvalid, e.BaseOffset)
		}
	}
	if news[0].BaseOffset != olds[0].BaseOffset || news[len(news)-1].LastOffset != olds[len(olds)-1].LastOffset {
		return fmt.Errorf("%w: news [%d, %d] do not cover olds [%d, %d]", ErrTierEntryInvalid,
			news[0].BaseOffset, news[len(news)-1].LastOffset, olds[0].BaseOffset, olds[len(olds)-1].LastOffset)
	}
	return nil
}

// tierSwapOps builds the guards and the operations, in the order documented
// on SwapTierEntriesRev.
func (s *Store) tierSwapOps(olds, news []TierEntry) ([]clientv3.Cmp, []clientv3.Op, error) {
	id, p := olds[0].TopicID, olds[0].Partition
	oldBases := make(map[int64]bool, len(olds))
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.keys.topicID(id)), ">", 0)}
	for _, e := range olds {
		oldBases[e.BaseOffset] = true
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.tierEntry(id, p, e.BaseOffset)), "=", e.Version))
	}
	var fresh, reused []clientv3.Op
	newBases := make(map[int64]bool, len(news))
	for _, e := range news {
		value, err := encodeTierEntry(e)
		if err != nil {
			return nil, nil, err
		}
		key := s.keys.tierEntry(id, p, e.BaseOffset)
		newBases[e.BaseOffset] = true
		if oldBases[e.BaseOffset] {
			reused = append(reused, clientv3.OpPut(key, string(value)))
			continue
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		fresh = append(fresh, clientv3.OpPut(key, string(value)))
	}
	ops := append(fresh, reused...)
	for _, e := range olds {
		if !newBases[e.BaseOffset] {
			ops = append(ops, clientv3.OpDelete(s.keys.tierEntry(id, p, e.BaseOffset)))
		}
	}
	return cmps, ops, nil
}

// swapAlreadyApplied reports whether current (the partition's entries)
// shows the swap done: every new entry present with its key and no old
// entry left under a base that news do not reuse. rev is the news' Version.
func swapAlreadyApplied(current, olds, news []TierEntry) (rev int64, ok bool) {
	byBase := make(map[int64]TierEntry, len(current))
	for _, e := range current {
		byBase[e.BaseOffset] = e
	}
	for _, e := range news {
		got, found := byBase[e.BaseOffset]
		if !found || got.Key != e.Key || got.LastOffset != e.LastOffset || (rev != 0 && got.Version != rev) {
			return 0, false
		}
		rev = got.Version
	}
	newBases := make(map[int64]bool, len(news))
	for _, e := range news {
		newBases[e.BaseOffset] = true
	}
	for _, e := range olds {
		if _, found := byBase[e.BaseOffset]; found && !newBases[e.BaseOffset] {
			return 0, false
		}
	}
	return rev, true
}
