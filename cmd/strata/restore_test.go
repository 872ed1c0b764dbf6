package main

import (
	"bytes"
	"testing"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// TestRestoreReportBucketEnd: per partition, the report names the range
// restored, its holes and where the bucket ends, and the partitions of
// topic.json's count that the bucket holds nothing of.
func TestRestoreReportBucketEnd(t *testing.T) {
	entries := func(n int) []metadata.TierEntry { return make([]metadata.TierEntry, n) }
	plans := map[int32]tier.RestorePartition{
		0: {Partition: 0, Entries: entries(2), LogStart: 0, End: 20, CutOffset: 20, BucketEnd: 20, BucketEndTime: 1_790_000_000_000,
			Gaps: [][2]int64{{5, 9}}},
		1: {Partition: 1, MaxEpoch: -1, MaxProducerID: -1}, // no objects
		2: {Partition: 2, Entries: entries(1), LogStart: 100, End: 105, CutOffset: 105, Cut: true, BucketEnd: 110,
			BucketEndTime: 1_790_000_000_500, Dropped: 5},
		3: {Partition: 3, LogStart: 7, End: 7, CutOffset: 7, BucketEnd: 9, BucketEndTime: 1_790_000_001_000, Dropped: 2},
	}
	var out bytes.Buffer
	r := &restorer{out: &out}
	r.report(tier.BucketTopic{Name: "orders", ID: replayTopicID},
		broker.RestoreResult{TopicID: replayTopicID.String(), Partitions: 4, Replicas: [][]int32{{1}}}, plans, nil)
	want := "topic orders: restored as topic id " + replayTopicID.String() + " from incarnation " + replayTopicID.String() +
		": 4 partitions, replication factor 1, 0 config overrides\n" +
		"  partition 0: offsets 0..19 from 2 objects, a hole at offsets 5-9 (no object holds it); " +
		"the bucket ends at offset 19 (2026-09-21T14:13:20Z)\n" +
		"  partition 0: not restorable: anything the old cluster held from offset 20 on (its hot tail, never uploaded)\n" +
		"  partition 1: empty: the bucket holds nothing of this partition\n" +
		"  partition 2: offsets 100..104 from 1 objects, cut at 105 inside an object, 5 later records in the bucket left out; " +
		"the bucket ends at offset 109 (2026-09-21T14:13:20.5Z)\n" +
		"  partition 3: empty: every record of the bucket is after --as-of; the bucket ends at offset 8 (2026-09-21T14:13:21Z)\n"
	if got := out.String(); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}

// TestRestoreReportDiskless: a diskless topic's report says it came back
// diskless, without a replication factor, and that what its unmerged runs
// held is lost.
func TestRestoreReportDiskless(t *testing.T) {
	plans := map[int32]tier.RestorePartition{
		0: {Partition: 0, Entries: make([]metadata.TierEntry, 3), LogStart: 0, End: 300, CutOffset: 300, BucketEnd: 300,
			BucketEndTime: 1_790_000_000_000},
	}
	var out bytes.Buffer
	r := &restorer{out: &out}
	r.report(tier.BucketTopic{Name: "events", ID: replayTopicID},
		broker.RestoreResult{TopicID: replayTopicID.String(), Partitions: 1, Replicas: [][]int32{{}}}, plans,
		map[string]string{"diskless.enable": "true"})
	want := "topic events: restored as diskless topic id " + replayTopicID.String() + " from incarnation " + replayTopicID.String() +
		": 1 partitions, 1 config overrides\n" +
		"  diskless: restored what the merge had written to segment objects; records still in runs not merged at the disaster " +
		"are lost (their bytes are in shared objects, their offsets were in etcd)\n" +
		"  partition 0: offsets 0..299 from 3 objects; the bucket ends at offset 299 (2026-09-21T14:13:20Z)\n" +
		"  partition 0: not restorable: anything the old cluster held from offset 300 on (its runs not merged yet, whose offsets were in etcd)\n"
	if got := out.String(); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}
