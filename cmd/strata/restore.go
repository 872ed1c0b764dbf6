package main

// `strata restore` (DESIGN.md §8): rebuild topics, their configs and tier
// manifests, and consumer-group offsets, from the bucket alone, into a
// running cluster whose etcd does not have them (a new cluster, or one
// whose etcd was lost). See docs/ARCHITECTURE.md, "Restore".
//
// The report names, per partition (every partition of topic.json's count),
// the offsets restored, the holes among them, and where the bucket ends
// (its last offset and that record's time, as `strata replay` says it);
// a partition the bucket holds nothing of is named as such. What the old
// cluster held past the bucket's end (its hot tail) is not restorable.
//
// A diskless topic (topic.json's configs say diskless.enable=true) comes
// back as a diskless topic, from the segment objects its merge wrote
// (docs/ARCHITECTURE.md, "Replay, restore and verify"). What the old
// cluster held past them, in runs not merged yet, is not restorable:
// the shared objects hold the bytes, but which offsets they had was only
// in etcd. The report says so.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

type restoreConfig struct {
	store, cluster, httpAddr string
	topics                   []string // nil: every topic in the bucket
	asOf                     *time.Time
	replicationFactor        int
	conn                     *connFlags
}

func parseRestoreArgs(c *cli, args []string) (restoreConfig, error) {
	var cfg restoreConfig
	fs := newFlagSet("restore", c)
	fs.StringVar(&cfg.store, "object-store", "", "the bucket `URL` (file:///path or s3://bucket/prefix?...)")
	fs.StringVar(&cfg.cluster, "cluster", metadata.DefaultCluster, "cluster name: the bucket prefix read, and the cluster restored into")
	fs.StringVar(&cfg.httpAddr, "http", "127.0.0.1:9644", "a running broker's --http `host:port` (it writes the topics into etcd)")
	var topics stringList
	fs.Var(&topics, "topic", "topic to restore (repeatable; default: every topic in the bucket)")
	asOf := fs.String("as-of", "", "restore each topic up to the last record at or before this RFC 3339 `time`")
	fs.IntVar(&cfg.replicationFactor, "replication-factor", -1, "replicas per partition (-1: min(3, live brokers); diskless topics have none)")
	cfg.conn = newConnFlags(fs, c)
	positional, err := parseArgs(fs, args)
	if err != nil {
		return cfg, err
	}
	if len(positional) > 0 {
		return cfg, usageErrorf("unexpected arguments %q", positional)
	}
	if cfg.store == "" {
		return cfg, usageErrorf("--object-store is required")
	}
	if *asOf != "" {
		t, err := time.Parse(time.RFC3339Nano, *asOf)
		if err != nil {
			return cfg, usageErrorf("--as-of %q: want an RFC 3339 time such as 2026-11-29T10:00:00Z", *asOf)
		}
		cfg.asOf = &t
	}
	if cfg.replicationFactor == 0 || cfg.replicationFactor < -1 || cfg.replicationFactor > 32767 {
		return cfg, usageErrorf("--replication-factor %d", cfg.replicationFactor)
	}
	cfg.topics = topics
	return cfg, nil
}

func runRestore(ctx context.Context, c *cli, args []string) error {
	cfg, err := parseRestoreArgs(c, args)
	if err != nil {
		return err
	}
	conn, err := cfg.conn.resolve()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bucket, err := tier.OpenExistingURL(ctx, cfg.store, logger)
	if err != nil {
		return usageErrorf("--object-store: %v", err)
	}
	found, err := tier.ListBucketTopics(ctx, bucket, cfg.cluster)
	if err != nil {
		return err
	}
	r := &restorer{cfg: cfg, store: bucket, out: c.stdout, progress: newRestoreProgress(c.stderr), restored: map[string]restoredTopic{}}
	chosen, err := r.choose(found)
	if err != nil {
		return err
	}
	r.progress.total = len(chosen)
	for _, bt := range chosen {
		if err := r.topic(ctx, bt); err != nil {
			return err
		}
	}
	r.progress.finish()
	return r.groups(ctx, found, conn)
}

// restorer runs one restore. Owned by runRestore's goroutine.
type restorer struct {
	cfg      restoreConfig
	store    tier.ObjectStore
	out      io.Writer
	progress *restoreProgress
	restored map[string]restoredTopic // by name
}

// restoredTopic is what group offsets are clamped to.
type restoredTopic struct {
	partitions map[int32]tier.RestorePartition
}

// choose picks, per topic name, the incarnation with the newest object
// (a topic deleted and re-created leaves older ones), and applies --topic.
func (r *restorer) choose(found []tier.BucketTopic) ([]tier.BucketTopic, error) {
	newest := map[string]tier.BucketTopic{}
	for _, bt := range found {
		if cur, ok := newest[bt.Name]; !ok || bt.Newest.After(cur.Newest) {
			newest[bt.Name] = bt
		}
	}
	var out []tier.BucketTopic
	for _, bt := range found {
		if newest[bt.Name].ID != bt.ID {
			fmt.Fprintf(r.out, "topic %s: skipping the older incarnation %s (restoring %s)\n", bt.Name, bt.ID, newest[bt.Name].ID)
		}
	}
	for _, name := range r.cfg.topics {
		if _, ok := newest[name]; !ok {
			return nil, fmt.Errorf("restore: topic %q has no objects in cluster %q of the bucket", name, r.cfg.cluster)
		}
	}
	for name, bt := range newest {
		if name == group.OffsetsTopic || name == txn.TopicName {
			continue // internal: the cluster creates them; offsets are read below
		}
		if r.cfg.topics == nil || slices.Contains(r.cfg.topics, name) {
			out = append(out, bt)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// topic plans every partition of one topic (uploading the tail objects an
// --as-of cut needs) and has a broker create it with its manifest.
func (r *restorer) topic(ctx context.Context, bt tier.BucketTopic) error {
	listed, err := tier.FindReplayTopic(ctx, r.store, r.cfg.cluster, bt.Name, bt.ID.String(), nil)
	if err != nil {
		return err
	}
	newID := bt.ID
	if r.cfg.asOf != nil {
		if newID, err = metadata.NewTopicID(); err != nil {
			return err
		}
	}
	req := broker.RestoreTopicRequest{Name: bt.Name, TopicID: newID.String(), Partitions: restorePartitionCount(bt, listed),
		ReplicationFactor: int16(r.cfg.replicationFactor)}
	if bt.File != nil {
		req.Configs = bt.File.Configs
	}
	opts := tier.RestoreOptions{AsOf: r.cfg.asOf, NewTopicID: newID}
	plans := map[int32]tier.RestorePartition{}
	for p := int32(0); p < req.Partitions; p++ {
		plan, err := r.partition(ctx, listed, p, opts)
		if err != nil {
			return fmt.Errorf("restore: topic %s partition %d: %w", bt.Name, p, err)
		}
		if r.cfg.asOf != nil {
			// A new incarnation owns copies: its directory alone describes
			// it, and the old one stays whole for another restore.
			if plan, err = tier.AdoptPlanObjects(ctx, r.store, listed, plan, newID, r.progress.copied); err != nil {
				return fmt.Errorf("restore: topic %s partition %d: %w", bt.Name, p, err)
			}
		}
		plans[p] = plan
		addRestoreEntries(&req, plan)
	}
	if r.cfg.asOf != nil {
		if err := putTopicFile(ctx, r.store, r.cfg.cluster, req, newID); err != nil {
			return err
		}
	}
	res, err := postRestore(ctx, r.cfg.httpAddr, req)
	if err != nil {
		return fmt.Errorf("restore: topic %s: %w", bt.Name, err)
	}
	r.restored[bt.Name] = restoredTopic{partitions: plans}
	r.report(bt, res, plans, req.Configs)
	r.progress.topicDone()
	return nil
}

// partition plans one partition; a partition with no objects restores empty.
func (r *restorer) partition(ctx context.Context, listed *tier.ReplayTopic, p int32, opts tier.RestoreOptions) (tier.RestorePartition, error) {
	if len(listed.Partitions[p]) == 0 {
		return tier.RestorePartition{Partition: p, MaxEpoch: -1, MaxProducerID: -1}, nil
	}
	return tier.RestorePartitionPlan(ctx, r.store, listed, p, opts)
}

// restorePartitionCount: topic.json's count, or enough for every partition
// that has objects.
func restorePartitionCount(bt tier.BucketTopic, listed *tier.ReplayTopic) int32 {
	n := int32(0)
	if bt.File != nil {
		n = bt.File.Partitions
	}
	for _, p := range listed.PartitionIDs() {
		n = max(n, p+1)
	}
	return n
}

func addRestoreEntries(req *broker.RestoreTopicRequest, plan tier.RestorePartition) {
	req.LeaderEpochs = append(req.LeaderEpochs, plan.MaxEpoch+1)
	req.NextProducerID = max(req.NextProducerID, plan.MaxProducerID+1)
	for _, e := range plan.Entries {
		req.Entries = append(req.Entries, broker.RestoreEntry{Partition: plan.Partition, BaseOffset: e.BaseOffset,
			LastOffset: e.LastOffset, FirstTimestamp: e.FirstTimestamp, MaxTimestamp: e.MaxTimestamp,
			LeaderEpoch: e.LeaderEpoch, Key: e.Key, Size: e.Size})
	}
	if len(plan.Entries) > 0 && plan.LogStart > plan.Entries[0].BaseOffset {
		if req.LogStarts == nil {
			req.LogStarts = map[int32]int64{}
		}
		req.LogStarts[plan.Partition] = plan.LogStart
	}
}

// report prints what one topic got, and what the bucket cannot give back.
func (r *restorer) report(bt tier.BucketTopic, res broker.RestoreResult, plans map[int32]tier.RestorePartition, configs map[string]string) {
	lost := "its hot tail, never uploaded"
	if metadata.DisklessConfigs(configs) {
		fmt.Fprintf(r.out, "topic %s: restored as diskless topic id %s from incarnation %s: %d partitions, %d config overrides\n",
			bt.Name, res.TopicID, bt.ID, res.Partitions, len(configs))
		fmt.Fprintf(r.out, "  diskless: restored what the merge had written to segment objects; records still in runs "+
			"not merged at the disaster are lost (their bytes are in shared objects, their offsets were in etcd)\n")
		lost = "its runs not merged yet, whose offsets were in etcd"
	} else {
		fmt.Fprintf(r.out, "topic %s: restored as topic id %s from incarnation %s: %d partitions, replication factor %d, %d config overrides\n",
			bt.Name, res.TopicID, bt.ID, res.Partitions, len(res.Replicas[0]), len(configs))
	}
	for p := int32(0); p < res.Partitions; p++ {
		r.reportPartition(p, plans[p], lost)
	}
}

// reportPartition prints one partition's restored range and where the
// bucket ends for it; lost names what the old cluster held past it.
func (r *restorer) reportPartition(p int32, plan tier.RestorePartition, lost string) {
	if plan.BucketEnd == 0 {
		fmt.Fprintf(r.out, "  partition %d: empty: the bucket holds nothing of this partition\n", p)
		return
	}
	bucketEnd := fmt.Sprintf("the bucket ends at offset %d (%s)", plan.BucketEnd-1, bucketTime(plan.BucketEndTime))
	if len(plan.Entries) == 0 {
		fmt.Fprintf(r.out, "  partition %d: empty: every record of the bucket is after --as-of; %s\n", p, bucketEnd)
		return
	}
	fmt.Fprintf(r.out, "  partition %d: offsets %d..%d from %d objects", p, plan.LogStart, plan.End-1, len(plan.Entries))
	if plan.Cut {
		fmt.Fprintf(r.out, ", cut at %d inside an object", plan.CutOffset)
	}
	if plan.AbortedOpen > 0 {
		fmt.Fprintf(r.out, ", %d transactions open at the cut aborted", plan.AbortedOpen)
	}
	if plan.Dropped > 0 {
		fmt.Fprintf(r.out, ", %d later records in the bucket left out", plan.Dropped)
	}
	for _, gap := range plan.Gaps {
		fmt.Fprintf(r.out, ", a hole at %s (no object holds it)", offsetsClause(gap[0], gap[1]))
	}
	fmt.Fprintf(r.out, "; %s\n", bucketEnd)
	if plan.Dropped == 0 {
		fmt.Fprintf(r.out, "  partition %d: not restorable: anything the old cluster held from offset %d on (%s)\n", p, plan.End, lost)
	}
}

// putTopicFile writes the new incarnation's topic.json (the broker would
// write it only at its first upload).
func putTopicFile(ctx context.Context, store tier.ObjectStore, cluster string, req broker.RestoreTopicRequest, id metadata.TopicID) error {
	body, err := tier.EncodeTopicFile(tier.TopicFile{Topic: req.Name, TopicID: id.String(), Partitions: req.Partitions, Configs: req.Configs})
	if err != nil {
		return err
	}
	key := tier.TopicConfigKey(cluster, req.Name, id)
	if err := store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("restore: put %s: %w", key, err)
	}
	return nil
}

// postRestore asks the broker at addr to create the topic.
func postRestore(ctx context.Context, addr string, req broker.RestoreTopicRequest) (broker.RestoreResult, error) {
	var res broker.RestoreResult
	body, err := json.Marshal(req)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	u := url.URL{Scheme: "http", Host: addr, Path: "/v1/restore/topic"}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return res, usageErrorf("--http %q: %v", addr, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return res, err
	}
	switch {
	case resp.StatusCode == http.StatusConflict:
		return res, fmt.Errorf("%w (restore only into a cluster that does not have the topic; delete it first)", errors.New(string(bytes.TrimSpace(answer))))
	case resp.StatusCode != http.StatusOK:
		return res, fmt.Errorf("broker answered %s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	if err := json.Unmarshal(answer, &res); err != nil || len(res.Replicas) == 0 {
		return res, fmt.Errorf("broker answer %q: %v", answer, err)
	}
	return res, nil
}

// restoreProgress draws "topics done / total, bytes copied" on a
// terminal's stderr; it is inert when stderr is not a terminal.
type restoreProgress struct {
	w           io.Writer // nil: not a terminal
	total, done int
	start       time.Time
	bytes       atomic.Int64 // copied; added to by copying goroutines
}

func (p *restoreProgress) copied(n int64) { p.bytes.Add(n) }

func newRestoreProgress(stderr io.Writer) *restoreProgress {
	p := &restoreProgress{start: time.Now()}
	if isTerminal(stderr) {
		p.w = stderr
	}
	return p
}

func (p *restoreProgress) topicDone() {
	p.done++
	if p.w == nil {
		return
	}
	elapsed := time.Since(p.start)
	eta := "?"
	if p.done > 0 {
		eta = formatDuration(elapsed * time.Duration(p.total-p.done) / time.Duration(p.done))
	}
	copied := p.bytes.Load()
	fmt.Fprintf(p.w, "\r\x1b[Krestored %d/%d topics, %s copied (%s/s)  ETA %s", p.done, p.total, formatBytes(copied),
		formatBytes(int64(float64(copied)/max(elapsed.Seconds(), 0.001))), eta)
}

func (p *restoreProgress) finish() {
	if p.w != nil {
		fmt.Fprintf(p.w, "\rrestored %d topics, %s copied, in %s            \n", p.done, formatBytes(p.bytes.Load()),
			time.Since(p.start).Round(time.Millisecond))
	}
}
