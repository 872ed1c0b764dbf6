package tier

// The orphan sweeper. Every broker sweeps: an object is deleted only once
// it is older than OrphanGrace, absent from the in-memory manifest, not
// awaiting a delayed delete, and absent from the manifest etcd holds, so
// two brokers sweeping at once delete only what both find orphaned.
//
// What keeps a bucket restorable (`strata restore`): the sweeper deletes
// objects only of topic ids etcd knows, live or recorded as deleted.
// Objects of an id etcd never heard of (its index was lost, or a restore
// is mid-way) are what a restore rebuilds from, and stay.

import (
	"context"
	"strings"
	"time"

	"github.com/strata-log/strata/metadata"
)

// SweepOrphans deletes segment objects of this cluster that no manifest
// entry names (an upload that crashed before its commit, a duplicate
// upload, a deleted topic's objects) and topic.json files of deleted
// topics, once they are older than OrphanGrace. Before deleting a segment
// object it re-reads the partition's entries from etcd, so a lagging
// in-memory manifest never costs a live object, and it deletes objects only
// of topic ids etcd has live or recorded as deleted.
func (s *Service) SweepOrphans(ctx context.Context, now time.Time) {
	if s.objects == nil {
		return
	}
	objs, err := s.objects.List(ctx, s.store.Cluster()+"/topics/")
	if err != nil {
		s.log.Warn("orphan sweep: listing the bucket", "err", err)
		return
	}
	live := s.manifest.Keys()
	for _, key := range s.PendingDeletes() {
		live[key] = struct{}{} // deleted soon, after their delay or grace
	}
	run := newSweepRun()
	for _, o := range objs {
		if _, ok := live[o.Key]; ok || now.Sub(o.ModTime) < s.cfg.OrphanGrace || ctx.Err() != nil {
			continue
		}
		if s.isOrphan(ctx, o.Key, run) {
			s.deleteOrphan(ctx, o.Key)
		}
	}
}

// PendingDeletes lists the objects no longer in the manifest that are
// deleted after a delay: remote retention's, and those tiered cleaning and
// merges swapped out. They are not orphans.
func (s *Service) PendingDeletes() []string {
	var out []string
	s.mu.Lock()
	for _, d := range s.pendingDeletes {
		out = append(out, d.key)
	}
	s.mu.Unlock()
	if s.compactor != nil {
		for key := range s.compactor.PendingDeletes() {
			out = append(out, key)
		}
	}
	return out
}

// isOrphan decides about one old object absent from the in-memory manifest.
func (s *Service) isOrphan(ctx context.Context, key string, run *sweepRun) bool {
	if strings.HasSuffix(key, "/topic.json") {
		return s.topicFileOrphan(ctx, key, run)
	}
	parts, err := ParseSegmentKey(key)
	if err != nil || parts.Cluster != s.store.Cluster() {
		return false // not ours to judge
	}
	switch id := s.topicIDStatus(ctx, run, parts.TopicID, key); {
	case id.err != nil || (!id.live && !id.deleted):
		return false // unknown to etcd: restorable, kept
	case id.deleted && !id.live:
		return true // its manifest went with it
	}
	tpKey := metadata.TierPartition{TopicID: parts.TopicID, Partition: parts.Partition}
	keys, ok := run.confirmed[tpKey]
	if !ok {
		entries, err := s.store.TierEntries(ctx, parts.TopicID, parts.Partition)
		if err != nil {
			s.log.Warn("orphan sweep: reading manifest", "key", key, "err", err)
			return false
		}
		keys = map[string]bool{}
		for _, e := range entries {
			keys[e.Key] = true
		}
		run.confirmed[tpKey] = keys
	}
	return !keys[key]
}

// topicFileOrphan: a topic.json whose topic id etcd records as deleted.
func (s *Service) topicFileOrphan(ctx context.Context, key string, run *sweepRun) bool {
	dir := strings.TrimSuffix(key, "/topic.json")
	element := dir[strings.LastIndexByte(dir, '/')+1:]
	const idLen = 22
	if len(element) < idLen+2 {
		return false
	}
	id, err := metadata.ParseTopicID(element[len(element)-idLen:])
	if err != nil {
		return false
	}
	if _, known := s.reg.TopicByID(id); known {
		return false
	}
	st := s.topicIDStatus(ctx, run, id, key)
	return st.err == nil && st.deleted && !st.live
}

func (s *Service) deleteOrphan(ctx context.Context, key string) {
	if err := s.objects.Delete(ctx, key); err != nil {
		s.log.Warn("orphan sweep: delete", "key", key, "err", err)
		return
	}
	s.count(func(c *Counters) { c.OrphansDeleted++ })
	s.log.Info("orphan sweep: deleted object absent from the manifest", "key", key)
}

// topicIDStatus is what etcd says about a topic id (TopicIDKnown).
type topicIDStatus struct {
	live, deleted bool
	err           error
}

// sweepRun is one orphan sweep's state, owned by its goroutine.
type sweepRun struct {
	// confirmed holds, per partition, the keys etcd's manifest names.
	confirmed map[metadata.TierPartition]map[string]bool
	// ids caches TopicIDKnown per id (one read and one log line per id).
	ids map[metadata.TopicID]topicIDStatus
}

func newSweepRun() *sweepRun {
	return &sweepRun{confirmed: map[metadata.TierPartition]map[string]bool{}, ids: map[metadata.TopicID]topicIDStatus{}}
}

// topicIDStatus asks etcd about id once per sweep. An id neither live nor
// deleted is logged (once per sweep): its objects are kept.
func (s *Service) topicIDStatus(ctx context.Context, run *sweepRun, id metadata.TopicID, key string) topicIDStatus {
	if st, ok := run.ids[id]; ok {
		return st
	}
	var st topicIDStatus
	st.live, st.deleted, st.err = s.store.TopicIDKnown(ctx, id)
	switch {
	case st.err != nil:
		s.log.Warn("orphan sweep: looking up a topic id", "topic_id", id.String(), "key", key, "err", st.err)
	case !st.live && !st.deleted:
		s.log.Info("orphan sweep: object of a topic id unknown to etcd: kept (restore can rebuild its index)",
			"topic_id", id.String(), "key", key)
	}
	run.ids[id] = st
	return st
}
