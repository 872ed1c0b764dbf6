package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tierStatus mirrors broker.PartitionTierStatus (JSON of /v1/tier/status).
type tierStatus struct {
	Partition  int32 `json:"partition"`
	LocalStart int64 `json:"localStart"`
	LocalEnd   int64 `json:"localEnd"`
	Tiered     bool  `json:"tiered"`
	TieredEnd  int64 `json:"tieredEnd"`
}

// tierStatusOf asks broker b for partition p of topic; ok is false when the
// broker does not answer or does not host it.
func tierStatusOf(b *Broker, topic string, p int32) (tierStatus, bool) {
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get("http://" + b.HTTPAddr + "/v1/tier/status?topic=" + topic)
	if err != nil {
		return tierStatus{}, false
	}
	defer resp.Body.Close()
	var list []tierStatus
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return tierStatus{}, false
	}
	for _, s := range list {
		if s.Partition == p {
			return s, true
		}
	}
	return tierStatus{}, false
}

// tailValue is record i's value: its number, then filler (4 KiB in all).
func tailValue(i int) string { return fmt.Sprintf("rec-%06d-%s", i, strings.Repeat("t", 4096)) }

// TestWipedReplicaReplicatesOnlyTheTail: with most of
// a partition only in MinIO, a follower restarted with an empty disk
// replicates the leader's hot tail, not the history; once it is the only
// broker left (so it leads), a read from offset 0 is served from the bucket
// and returns every record.
func TestWipedReplicaReplicatesOnlyTheTail(t *testing.T) {
	defer timed(t, "TestWipedReplicaReplicatesOnlyTheTail")()
	c := Start(t, Config{MinIO: true, ExtraArgs: []string{
		"--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms"}})
	const (
		topic   = "tail"
		records = 600 // about 2.4 MiB against a 192 KiB local retention
	)
	replicatedTopic(t, c, topic, 1, map[string]string{
		"internal.segment.bytes": "65536", "local.retention.bytes": "196608", "retention.ms": "-1"})
	produceNumbered(t, c, topic, 0, 0, records)
	m := mustPartition(t, c, topic, 0)
	leader := c.Broker(m.Leader)
	c.WaitFor("the leader's history in the bucket and gone from its disk", 90*time.Second, func() (bool, string) {
		s, ok := tierStatusOf(leader, topic, 0)
		return ok && s.Tiered && s.LocalStart > records/2 && s.TieredEnd >= s.LocalStart, fmt.Sprintf("%+v", s)
	})

	wiped := followers(m)[0]
	c.Kill(wiped)
	c.Wipe(wiped)
	c.Restart(wiped)
	produceNumbered(t, c, topic, 0, records, 20) // acks=all: needs 2 in sync
	waitISRContains(t, c, topic, 0, wiped)
	bases := segmentBases(t, c.Broker(wiped), topic, 0)
	if len(bases) == 0 || bases[0] < records/2 {
		t.Fatalf("wiped broker %d holds local segments from %v: it replicated the history, not the hot tail", wiped, bases)
	}
	size := dirBytes(c.Broker(wiped).DataDir)
	if size > int64(records)*4096/2 {
		t.Fatalf("wiped broker %d holds %d bytes after catching up, more than half the %d produced", wiped, size, records*4096)
	}
	t.Logf("wiped broker %d replicated from offset %d (%d bytes on disk)", wiped, bases[0], size)

	for _, id := range m.Replicas {
		if id != wiped {
			c.Kill(id)
		}
	}
	c.WaitFor(fmt.Sprintf("broker %d to lead alone", wiped), electionTimeout, func() (bool, string) {
		got, err := c.PartitionFrom(wiped, topic, 0)
		return err == nil && got.Leader == wiped, fmt.Sprint(got, err)
	})
	b := c.Broker(wiped)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coldBefore, err := b.MetricSum(ctx, "strata_cold_gets_total")
	if err != nil {
		t.Fatal(err)
	}
	readNumbered(t, c, wiped, topic, 0, records+20)
	coldAfter, err := b.MetricSum(ctx, "strata_cold_gets_total")
	if err != nil {
		t.Fatal(err)
	}
	if coldAfter <= coldBefore {
		t.Fatalf("reading offsets below the local tail made no bucket GET on broker %d (strata_cold_gets_total %v -> %v)",
			wiped, coldBefore, coldAfter)
	}
}

// produceNumbered writes tailValue(from..from+n-1) to partition p, acks=all.
func produceNumbered(t *testing.T, c *Cluster, topic string, p int32, from, n int) {
	t.Helper()
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte(tailValue(i))})
	}
	if err := produceSync(t, cl, 2*time.Minute, recs...); err != nil {
		t.Fatalf("produce %d records: %v", n, err)
	}
	cl.Close()
}

// readNumbered reads partition p from offset 0 through broker id only and
// checks that offset i holds tailValue(i), for n records.
func readNumbered(t *testing.T, c *Cluster, id int32, topic string, p int32, n int) {
	t.Helper()
	cl := c.BrokerClient(id, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	next := 0
	for next < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records through broker %d: %v", next, n, id, fetches.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || string(r.Value) != tailValue(next) {
				t.Fatalf("offset %d: got %.20q, want record %d", r.Offset, r.Value, next)
			}
			next++
		})
	}
}
