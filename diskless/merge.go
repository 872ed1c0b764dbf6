package diskless

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// Merge defaults.
const (
	// DefaultMergeInterval is how often a broker merges the partitions it
	// owns.
	DefaultMergeInterval = 30 * time.Second
	// DefaultMergeAge: runs committed this long ago are merged. Younger
	// ones are what consumers of the tail read, from the object cache.
	DefaultMergeAge = time.Minute
	// DefaultMergeBytes bounds one merged segment object.
	DefaultMergeBytes = 64 << 20
	// DefaultSweepGrace: a shared object no run references is deleted
	// once it is this old (longer than any PUT-to-commit, and than any
	// read that found its run just before the merge removed it).
	DefaultSweepGrace = 5 * time.Minute
)

// MergeStore is the slice of etcd the merge and retention need
// (*metadata.Store).
type MergeStore interface {
	HeadStore
	CommitTierEntry(ctx context.Context, e metadata.TierEntry) error
	TierEntries(ctx context.Context, id metadata.TopicID, partition int32) ([]metadata.TierEntry, error)
	DeleteDisklessRuns(ctx context.Context, p metadata.TierPartition, bases []int64) error
	DeleteTierEntries(ctx context.Context, id metadata.TopicID, partition int32, entries []metadata.TierEntry) error
}

// ObjectDeleter deletes bucket objects whose manifest entries are gone
// after a delay, so reads that found an entry just before finish first
// (*tier.Service, which does the same for classic remote retention).
type ObjectDeleter interface {
	DeleteObjectsLater(keys []string, now time.Time)
}

// MergePartition is a diskless partition this broker merges.
type MergePartition struct {
	Topic string
	Part  metadata.TierPartition
	// Partitions and Configs describe the topic for its topic.json, which
	// replay and restore read from the bucket.
	Partitions int32
	Configs    map[string]string
}

// MergeConfig configures a Merger.
type MergeConfig struct {
	Cluster string
	// Age, Bytes, Interval, SweepGrace: see the Default* constants.
	Age        time.Duration
	Bytes      int64
	Interval   time.Duration
	SweepGrace time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

func (c MergeConfig) withDefaults() MergeConfig {
	if c.Age <= 0 {
		c.Age = DefaultMergeAge
	}
	if c.Bytes <= 0 {
		c.Bytes = DefaultMergeBytes
	}
	if c.Interval <= 0 {
		c.Interval = DefaultMergeInterval
	}
	if c.SweepGrace <= 0 {
		c.SweepGrace = DefaultSweepGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Merger rewrites committed runs into the ordinary per-partition segment
// objects and manifest entries of classic tiered topics, applies the
// topics' retention to those (doc.go, "Merge and retention"), and deletes
// shared objects no run references any more.
type Merger struct {
	cfg     MergeConfig
	store   MergeStore
	bucket  objstore.ObjectStore
	reader  *Reader
	deleter ObjectDeleter
	stats   *Stats
	// unreferenced is when each shared object was first seen with no
	// run referencing it; topicFiles the topic.json last written per
	// topic (both owned by the Run goroutine).
	unreferenced map[string]time.Time
	topicFiles   map[metadata.TopicID]string
}

// NewMerger returns a merger reading through reader (its index and cache);
// deleter deletes the merged objects retention removes.
func NewMerger(cfg MergeConfig, store MergeStore, bucket objstore.ObjectStore, reader *Reader, deleter ObjectDeleter, stats *Stats) *Merger {
	return &Merger{cfg: cfg.withDefaults(), store: store, bucket: bucket, reader: reader, deleter: deleter, stats: stats,
		unreferenced: map[string]time.Time{}, topicFiles: map[metadata.TopicID]string{}}
}

// Run merges the partitions owned() returns and then applies their
// retention, and sweeps when sweeper() says this broker is the one that
// does, every Interval until ctx ends.
func (m *Merger) Run(ctx context.Context, owned func() []MergePartition, sweeper func() bool) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range owned() {
			if err := m.MergePartition(ctx, p); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("diskless merge failed; retrying next pass", "topic", p.Topic, "partition", p.Part.Partition, "err", err)
			}
			if err := m.ApplyRetention(ctx, p); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("diskless retention failed; retrying next pass", "topic", p.Topic, "partition", p.Part.Partition, "err", err)
			}
		}
		if sweeper() {
			if err := m.Sweep(ctx); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("diskless sweep failed; retrying next pass", "err", err)
			}
		}
	}
}

// MergePartition merges the partition's runs committed at least Age ago,
// oldest first, into segment objects of at most Bytes each.
func (m *Merger) MergePartition(ctx context.Context, p MergePartition) error {
	for ctx.Err() == nil {
		runs := m.mergeable(p.Part)
		if len(runs) == 0 {
			return nil
		}
		if err := m.mergeRuns(ctx, p, runs); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// mergeable is the oldest contiguous runs old enough to merge, at most
// Bytes of batches (at least one run).
func (m *Merger) mergeable(tp metadata.TierPartition) []indexedRun {
	cutoff := m.cfg.Now().Add(-m.cfg.Age).UnixMilli()
	var out []indexedRun
	var size int64
	for _, r := range m.reader.ix.runsOf(tp, maxRunsPerMerge) {
		if r.run.CommittedMs > cutoff || (len(out) > 0 && (r.base != out[len(out)-1].end || size+r.run.bytes() > m.cfg.Bytes)) {
			break
		}
		out = append(out, r)
		size += r.run.bytes()
	}
	return out
}

// maxRunsPerMerge bounds the runs of one merged object.
const maxRunsPerMerge = 4096

// mergeRuns writes runs' batches, offsets patched, as one segment object,
// commits its manifest entry, then deletes the runs. A crash between the two
// leaves both: readers prefer the runs, and the next pass finds the entry
// already committed and only deletes them.
func (m *Merger) mergeRuns(ctx context.Context, p MergePartition, runs []indexedRun) error {
	if done, err := m.deleteMerged(ctx, p, runs); done || err != nil {
		return err
	}
	var log []byte
	first := recordbatch.Header{}
	maxTs := int64(-1)
	for i, r := range runs {
		object, err := m.reader.object(ctx, r.run)
		if err != nil {
			return err
		}
		base := r.base
		for j, b := range r.run.Batches {
			ref := BatchRef{TopicPartition: TopicPartition(p.Part), Position: b[0], Length: int32(b[1]), Records: int32(b[2]), CRC: uint32(b[3])}
			batch, err := ReadBatch(object, ref)
			if err != nil {
				return fmt.Errorf("object %s: %w", r.run.Object, err)
			}
			if i == 0 && j == 0 {
				first, _ = recordbatch.ParseHeader(batch)
			}
			log = AppendPatched(log, batch, base)
			base += b[2]
		}
		maxTs = max(maxTs, r.run.MaxTimestamp)
	}
	if err := m.ensureTopicFile(ctx, p); err != nil {
		return err
	}
	last := runs[len(runs)-1].end - 1
	enc, err := tier.EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), tier.SegmentMeta{
		Topic: p.Topic, TopicID: p.Part.TopicID, Partition: p.Part.Partition})
	if err != nil {
		return err
	}
	key, err := tier.SegmentKey(tier.SegmentKeyParts{Cluster: m.cfg.Cluster, Topic: p.Topic, TopicID: p.Part.TopicID,
		Partition: p.Part.Partition, BaseOffset: runs[0].base})
	if err != nil {
		return err
	}
	if err := m.bucket.Put(ctx, key, enc.NewReader(), enc.Size()); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	entry := metadata.TierEntry{TopicID: p.Part.TopicID, Partition: p.Part.Partition, BaseOffset: runs[0].base,
		LastOffset: last, FirstTimestamp: first.FirstTimestamp, MaxTimestamp: maxTs, Key: key, Size: enc.Size()}
	if err := m.store.CommitTierEntry(ctx, entry); errors.Is(err, metadata.ErrTierEntryExists) {
		// Another broker merged from the same run meanwhile (ownership
		// moved); this object is an orphan for tier's sweeper.
		done, err := m.deleteMerged(ctx, p, runs)
		if err == nil && !done {
			err = fmt.Errorf("an entry at offset %d exists but covers none of the runs from it", runs[0].base)
		}
		return err
	} else if err != nil {
		return err
	}
	bases := make([]int64, len(runs))
	for i, r := range runs {
		bases[i] = r.base
	}
	if err := m.store.DeleteDisklessRuns(ctx, p.Part, bases); err != nil {
		return err
	}
	m.reader.ix.dropRuns(p.Part, bases) // the watch confirms; readers go to the bucket at once
	m.stats.merges.Add(1)
	m.stats.mergedBytes.Add(int64(len(log)))
	return nil
}

// deleteMerged deletes the runs that a committed manifest entry already
// covers (a pass that died between its commit and the deletion, or another
// broker's merge) and reports whether the first run was one of them: then
// nothing is merged this round. Entries end at run boundaries, since every
// merge takes whole runs, so a run is either covered or not.
func (m *Merger) deleteMerged(ctx context.Context, p MergePartition, runs []indexedRun) (bool, error) {
	entries, err := m.store.TierEntries(ctx, p.Part.TopicID, p.Part.Partition)
	if err != nil {
		return false, err
	}
	var covered []int64
	for _, r := range runs {
		if !coveredBy(entries, r) {
			break
		}
		covered = append(covered, r.base)
	}
	if len(covered) == 0 {
		return false, nil
	}
	m.cfg.Logger.Info("diskless merge: runs already merged; deleting them", "partition", p.Part, "runs", len(covered), "base", covered[0])
	if err := m.store.DeleteDisklessRuns(ctx, p.Part, covered); err != nil {
		return true, err
	}
	m.reader.ix.dropRuns(p.Part, covered)
	return true, nil
}

// coveredBy reports whether an entry holds all of r's offsets.
func coveredBy(entries []metadata.TierEntry, r indexedRun) bool {
	for _, e := range entries {
		if e.BaseOffset <= r.base && r.end-1 <= e.LastOffset {
			return true
		}
	}
	return false
}

// ensureTopicFile writes the topic's topic.json before its first merged
// object, as the uploader does for classic topics, and again when it
// changed.
func (m *Merger) ensureTopicFile(ctx context.Context, p MergePartition) error {
	body, err := tier.EncodeTopicFile(tier.TopicFile{Topic: p.Topic, TopicID: p.Part.TopicID.String(),
		Partitions: p.Partitions, Configs: p.Configs})
	if err != nil {
		return err
	}
	if m.topicFiles[p.Part.TopicID] == string(body) {
		return nil
	}
	key := tier.TopicConfigKey(m.cfg.Cluster, p.Topic, p.Part.TopicID)
	if err := m.bucket.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	m.topicFiles[p.Part.TopicID] = string(body)
	return nil
}

// Sweep deletes the shared objects no run has referenced for SweepGrace
// (as this broker's index saw it) and that are older than that: garbage of
// failed commits, and objects whose runs were all merged, once no read that
// found a run just before the merge can still want them.
func (m *Merger) Sweep(ctx context.Context) error {
	if !m.reader.ix.Loaded() {
		return nil // an empty index would make every object look unreferenced
	}
	objects, err := m.bucket.List(ctx, ObjectPrefix(m.cfg.Cluster))
	if err != nil {
		return err
	}
	live := m.reader.ix.Objects()
	now := m.cfg.Now()
	cutoff := now.Add(-m.cfg.SweepGrace)
	listed := map[string]bool{}
	for _, o := range objects {
		id, ok := objectIDOf(m.cfg.Cluster, o.Key)
		if !ok || live[id] {
			continue
		}
		listed[id] = true
		since, seen := m.unreferenced[id]
		if !seen {
			m.unreferenced[id] = now
			continue
		}
		if since.After(cutoff) || o.ModTime.After(cutoff) {
			continue
		}
		if err := m.bucket.Delete(ctx, o.Key); err != nil {
			return err
		}
		m.stats.swept.Add(1)
	}
	for id := range m.unreferenced {
		if !listed[id] {
			delete(m.unreferenced, id) // deleted, or referenced again
		}
	}
	return nil
}

// objectIDOf reads a shared object's id back from its key.
func objectIDOf(cluster, key string) (string, bool) {
	prefix, suffix := ObjectPrefix(cluster), ".shared"
	if len(key) <= len(prefix)+len(suffix) || key[:len(prefix)] != prefix || key[len(key)-len(suffix):] != suffix {
		return "", false
	}
	return key[len(prefix) : len(key)-len(suffix)], true
}
