package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReassignMovesOnlyTheTail: a partition with most of its history in
// the bucket moves its leader's replica to a new broker while a producer
// writes. The new replica copies only the leader's local tail, joins the
// ISR, leadership passes to it last, the old replica's local copy goes, and
// every record reads back in order through the new broker.
func TestReassignMovesOnlyTheTail(t *testing.T) {
	defer timed(t, "TestReassignMovesOnlyTheTail")()
	c := Start(t, Config{MinIO: true, Spare: 1, ExtraArgs: []string{
		"--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms"}})
	const (
		topic   = "moving"
		history = 600 // about 2.4 MiB against a 192 KiB local retention
	)
	replicatedTopic(t, c, topic, 1, map[string]string{
		"internal.segment.bytes": "65536", "local.retention.bytes": "196608", "retention.ms": "-1"})
	produceNumbered(t, c, topic, 0, 0, history)
	m := mustPartition(t, c, topic, 0)
	leader := c.Broker(m.Leader)
	c.WaitFor("the leader's history in the bucket and gone from its disk", 90*time.Second, func() (bool, string) {
		s, ok := tierStatusOf(leader, topic, 0)
		return ok && s.Tiered && s.LocalStart > history/2 && s.TieredEnd >= s.LocalStart, fmt.Sprintf("%+v", s)
	})
	atStart, _ := tierStatusOf(leader, topic, 0)
	added := c.AddBroker().ID
	target := slices.Clone(m.Replicas)
	target[slices.Index(target, m.Leader)] = added // the leader's replica moves

	// A producer writes numbered records throughout the move.
	var (
		wg         sync.WaitGroup
		produced   = history // written by the producer goroutine until wg.Wait
		produceErr error
		stop       = make(chan struct{})
	)
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var recs []*kgo.Record
			for i := produced; i < produced+10; i++ {
				recs = append(recs, &kgo.Record{Partition: 0, Value: []byte(tailValue(i))})
			}
			err := cl.ProduceSync(pctx, recs...).FirstErr()
			cancel()
			if err != nil {
				produceErr = fmt.Errorf("produce at %d: %w", produced, err)
				return
			}
			produced += 10
		}
	}()

	adm := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, target)
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("AlterPartitionAssignments %v: %v", target, err)
	}
	c.WaitFor(fmt.Sprintf("%s-0 moved to %v", topic, target), 2*time.Minute, func() (bool, string) {
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return false, err.Error()
		}
		got, err := c.Partition(topic, 0)
		if err != nil {
			return false, err.Error()
		}
		return len(listed) == 0 && slices.Equal(got.Replicas, target) && got.Leader != m.Leader && got.Leader >= 0,
			fmt.Sprintf("%v ongoing %v", got, listed)
	})
	close(stop)
	wg.Wait()
	if produceErr != nil {
		t.Fatal(produceErr)
	}

	bases := segmentBases(t, c.Broker(added), topic, 0)
	if len(bases) == 0 || bases[0] < history/2 {
		t.Fatalf("new replica %d holds local segments from %v: it copied the history, not the hot tail", added, bases)
	}
	if _, err := os.Stat(filepath.Join(leader.DataDir, topic+"-0")); !os.IsNotExist(err) {
		t.Fatalf("the old leader %d still has the partition's directory (%v)", m.Leader, err)
	}
	var moved, moves, moveSeconds float64
	for _, id := range c.Up() {
		for name, sum := range map[string]*float64{"strata_reassignment_bytes_out_total": &moved,
			"strata_reassignment_duration_seconds_count": &moves, "strata_reassignment_duration_seconds_sum": &moveSeconds} {
			n, err := c.Broker(id).MetricSum(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			*sum += n
		}
	}
	if moves != 1 || moveSeconds <= 0 || moveSeconds > 120 {
		t.Fatalf("strata_reassignment_duration_seconds: %v moves taking %v s, want the one move", moves, moveSeconds)
	}
	// The tail to copy: the leader's local records when the move began,
	// and those produced while it ran.
	recordBytes := len(tailValue(0))
	tail := int(atStart.LocalEnd-atStart.LocalStart+int64(produced-history)) * recordBytes
	historyBytes := float64(produced * recordBytes)
	if moved <= 0 || moved > 1.5*float64(tail) || moved > historyBytes/2 {
		t.Fatalf("the move copied %.0f bytes (strata_reassignment_bytes_out_total): want (0, 1.5 × the %d-byte local tail], well under the %.0f-byte history",
			moved, tail, historyBytes)
	}
	t.Logf("moved %s-0 %v→%v in %.2f s: copied %.0f bytes for a %d-byte local tail (history %.0f bytes, %d records); new replica starts at offset %d",
		topic, m.Replicas, target, moveSeconds, moved, tail, historyBytes, produced, bases[0])
	readNumbered(t, c, added, topic, 0, produced)

	// DescribeLogDirs: the new leader lists the partition's local bytes in
	// its data dir and the bucket's bytes in the "tiered:bucket" dir.
	final := mustPartition(t, c, topic, 0)
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var local, tiered int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Broker != final.Leader {
			return
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if d.Dir == "tiered:bucket" {
				tiered += p.Size
			} else {
				local += p.Size
			}
		})
	})
	if local <= 0 || tiered <= 0 || float64(tiered) < historyBytes/4 {
		t.Fatalf("DescribeLogDirs of the leader %d: local %d, tiered %d bytes (history %.0f)", final.Leader, local, tiered, historyBytes)
	}
}

// TestReassignSurvivesKills: moves are submitted, then the controller is
// killed (-9) and, separately, the leader of another moving partition. Each
// move completes under the next controller and leader, from the state in
// etcd, and every record reads back in order.
func TestReassignSurvivesKills(t *testing.T) {
	defer timed(t, "TestReassignSurvivesKills")()
	c := Start(t, Config{MinIO: true, Spare: 1, ExtraArgs: []string{
		"--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms"}})
	const (
		topic   = "moving-kills"
		records = 200
	)
	replicatedTopic(t, c, topic, 2, map[string]string{"internal.segment.bytes": "65536", "retention.ms": "-1"})
	for p := int32(0); p < 2; p++ {
		produceNumbered(t, c, topic, p, 0, records)
	}
	added := c.AddBroker().ID
	adm := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	meta, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	controller := meta.Controller
	// Both partitions move off the controller (killed first, so the moves
	// are begun without it and completed by the next one) onto the new
	// broker; p1's leader is killed while its move runs.
	m0, m1 := mustPartition(t, c, topic, 0), mustPartition(t, c, topic, 1)
	target := []int32{added}
	for _, id := range []int32{1, 2, 3} {
		if id != controller {
			target = append(target, id)
		}
	}
	target0, target1 := target, []int32{target[1], target[0], target[2]}

	c.Kill(controller)
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, target0)
	req.Assign(topic, 1, target1)
	c.WaitFor("the moves submitted through a live broker", 30*time.Second, func() (bool, string) {
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = resp.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	killedLeader := m1.Leader
	if killedLeader == controller { // already dead: kill another replica p1 keeps
		killedLeader = target1[0]
	}
	c.Kill(killedLeader)
	t.Logf("killed controller %d, then broker %d (p1's leader was %d); moving p0 %v→%v, p1 %v→%v", controller, killedLeader,
		m1.Leader, m0.Replicas, target0, m1.Replicas, target1)
	for p, want := range [][]int32{target0, target1} {
		c.WaitFor(fmt.Sprintf("%s-%d moved to %v", topic, p, want), 2*time.Minute, func() (bool, string) {
			got, err := c.Partition(topic, int32(p))
			return err == nil && slices.Equal(got.Replicas, want) && got.Leader >= 0 && slices.Contains(want, got.Leader),
				fmt.Sprint(got, err)
		})
	}
	c.Restart(controller)
	c.Restart(killedLeader)
	c.WaitFor("no reassignment listed", 30*time.Second, func() (bool, string) {
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
		return err == nil && len(listed) == 0, fmt.Sprint(listed, err)
	})
	for p := int32(0); p < 2; p++ {
		readNumbered(t, c, added, topic, p, records)
	}
}

// TestReassignThrottled: with leader.replication.throttled.rate set
// cluster-wide (as kafka-reassign-partitions --throttle does), a move
// copies its tail no faster than the rate (plus one second's burst and one
// batch, the throttle's grain), and still completes.
func TestReassignThrottled(t *testing.T) {
	defer timed(t, "TestReassignThrottled")()
	c := Start(t, Config{Spare: 1})
	const (
		topic   = "throttled"
		records = 300 // about 1.2 MiB
		rate    = 256 << 10
	)
	replicatedTopic(t, c, topic, 1, map[string]string{"internal.segment.bytes": "65536", "retention.ms": "-1"})
	for i := 0; i < records; i += 10 { // small batches: the throttle's grain is one batch
		produceNumbered(t, c, topic, 0, i, 10)
	}
	adm := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v := strconv.Itoa(rate)
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: &v}}); err != nil {
		t.Fatal(err)
	}
	added := c.AddBroker().ID
	m := mustPartition(t, c, topic, 0)
	target := slices.Clone(m.Replicas)
	target[slices.Index(target, followers(m)[0])] = added
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, target)
	start := time.Now()
	if resp, err := adm.AlterPartitionAssignments(ctx, req); err != nil || resp.Error() != nil {
		t.Fatalf("AlterPartitionAssignments: %v %v", err, resp.Error())
	}
	// While it runs (throttled, seconds), topic describe shows the move.
	out, err := c.runStrata(30*time.Second, "topic", "describe", "--brokers", strings.Join(c.Addrs(), ","), topic)
	if want := fmt.Sprintf("adding [%d] removing [%d]", added, followers(m)[0]); err != nil || !strings.Contains(out, want) {
		t.Fatalf("topic describe during the move (%v):\n%s\nwant %q", err, out, want)
	}
	c.WaitFor(fmt.Sprintf("%s-0 moved to %v", topic, target), 90*time.Second, func() (bool, string) {
		got, err := c.Partition(topic, 0)
		return err == nil && slices.Equal(got.Replicas, target), fmt.Sprint(got, err)
	})
	elapsed := time.Since(start)
	moved, err := c.Broker(m.Leader).MetricSum(ctx, "strata_reassignment_bytes_out_total")
	if err != nil {
		t.Fatal(err)
	}
	if limit := float64(rate)*elapsed.Seconds() + rate + 64<<10; moved > limit || moved < records*4096 {
		t.Fatalf("moved %.0f bytes in %v at %d B/s: want at least the %d-byte tail, at most %.0f", moved, elapsed, rate, records*4096, limit)
	}
	t.Logf("moved %.0f bytes in %v under a %d B/s throttle (%.0f B/s)", moved, elapsed.Round(time.Millisecond), rate, moved/elapsed.Seconds())
	readNumbered(t, c, added, topic, 0, records)
}
