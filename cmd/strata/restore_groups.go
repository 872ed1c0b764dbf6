package main

// Consumer-group offsets for `strata restore`: folded from the tiered
// __consumer_offsets in the bucket as of --as-of, clamped to the restored
// ranges, and committed through the Kafka protocol.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// restoreCommitTimeout bounds the retries of one group's commit while a
// new cluster's coordinators load.
const restoreCommitTimeout = 60 * time.Second

// groups restores every group's offsets for the topics restored.
func (r *restorer) groups(ctx context.Context, found []tier.BucketTopic, conn connConfig) error {
	var offsetsTopic *tier.BucketTopic
	for i, bt := range found {
		if bt.Name == group.OffsetsTopic && (offsetsTopic == nil || bt.Newest.After(offsetsTopic.Newest)) {
			offsetsTopic = &found[i]
		}
	}
	if offsetsTopic == nil {
		fmt.Fprintf(r.out, "groups: no %s in the bucket: no group offsets restored\n", group.OffsetsTopic)
		return nil
	}
	history, err := r.foldOffsets(ctx, *offsetsTopic)
	if err != nil {
		return fmt.Errorf("restore: reading %s from the bucket: %w", group.OffsetsTopic, err)
	}
	cl, err := kgo.NewClient(conn.opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	byGroup := history.Offsets()
	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		offsets, clamped, skipped := r.clampOffsets(byGroup[g])
		if len(offsets) == 0 {
			continue
		}
		if err := commitRestored(ctx, adm, g, offsets); err != nil {
			return fmt.Errorf("restore: group %s: %w", g, err)
		}
		fmt.Fprintf(r.out, "group %s: %d offsets restored (%d clamped to the restored ranges, %d of topics not restored)\n",
			g, countOffsets(offsets), clamped, skipped)
	}
	return nil
}

// foldOffsets reads every committed record of __consumer_offsets in the
// bucket into an OffsetHistory as of --as-of.
func (r *restorer) foldOffsets(ctx context.Context, bt tier.BucketTopic) (*group.OffsetHistory, error) {
	asOf := int64(-1)
	if r.cfg.asOf != nil {
		asOf = r.cfg.asOf.UnixMilli()
	}
	history := group.NewOffsetHistory(asOf)
	listed, err := tier.FindReplayTopic(ctx, r.store, r.cfg.cluster, bt.Name, bt.ID.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, p := range listed.PartitionIDs() {
		if err := foldOffsetsPartition(ctx, r.store, listed.Partitions[p], history); err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
	}
	return history, nil
}

func foldOffsetsPartition(ctx context.Context, store tier.ObjectStore, objs []tier.ReplayObject, history *group.OffsetHistory) error {
	aborted, err := tier.ReplayAborted(ctx, store, objs, 0)
	if err != nil {
		return err
	}
	reader := tier.NewReplayReader(ctx, store, tier.PlanReplay(objs), tier.ReplayOptions{FromTime: -1, Committed: true, Aborted: aborted})
	defer reader.Close()
	for {
		b, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		records, err := recordbatch.DecodeRecords(b.Data, replayMaxDecompressed)
		if err != nil {
			return fmt.Errorf("batch at %d: %w", b.Header.BaseOffset, err)
		}
		for i := range records {
			rec := &records[i]
			offset, ts := recordPosition(b.Header, rec)
			if offset < b.From || offset > b.To {
				continue
			}
			if err := history.Add(rec.Key, rec.Value, ts); err != nil {
				return fmt.Errorf("record at %d: %w", offset, err)
			}
		}
	}
}

// clampOffsets keeps the offsets of restored partitions, each moved into
// the partition's restored range [log start, end].
func (r *restorer) clampOffsets(in map[group.TopicPartition]group.Offset) (out kadm.Offsets, clamped, skipped int) {
	out = kadm.Offsets{}
	for tp, o := range in {
		plan, ok := r.restored[tp.Topic].partitions[tp.Partition]
		if !ok {
			skipped++
			continue
		}
		at, epoch := o.Offset, o.LeaderEpoch
		if c := min(max(at, plan.LogStart), plan.End); c != at {
			at, epoch = c, -1
			clamped++
		}
		out.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: at, LeaderEpoch: epoch, Metadata: o.Metadata})
	}
	return out, clamped, skipped
}

func countOffsets(o kadm.Offsets) int {
	n := 0
	o.Each(func(kadm.Offset) { n++ })
	return n
}

// commitRestored commits offsets for group g, retrying while a new
// cluster's coordinator loads or the topics' metadata spreads.
func commitRestored(ctx context.Context, adm *kadm.Client, g string, offsets kadm.Offsets) error {
	deadline := time.Now().Add(restoreCommitTimeout)
	for {
		resp, err := adm.CommitOffsets(ctx, g, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			return nil
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
