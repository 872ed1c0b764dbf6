package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/test/history"
)

// Bounds of the acceptance tests' waits.
const (
	electionTimeout = 30 * time.Second // lease expiry (3s) + election + metadata
	isrTimeout      = 60 * time.Second // a restarted replica catching up
	progressTimeout = 30 * time.Second
)

// replicatedTopic creates topic with RF 3 and min.insync.replicas 2 (plus
// extra configs) and waits until every partition has a leader and all
// three replicas in sync.
func replicatedTopic(t *testing.T, c *Cluster, topic string, partitions int32, extra map[string]string) {
	t.Helper()
	configs := map[string]string{"min.insync.replicas": "2"}
	for k, v := range extra {
		configs[k] = v
	}
	c.CreateTopic(topic, partitions, 3, configs)
	for p := int32(0); p < partitions; p++ {
		waitISR(t, c, topic, p, []int32{1, 2, 3})
	}
}

// waitISR waits until the partition has a leader in the ISR and the ISR is
// exactly want.
func waitISR(t *testing.T, c *Cluster, topic string, p int32, want []int32) PartitionMeta {
	t.Helper()
	var got PartitionMeta
	c.WaitFor(fmt.Sprintf("%s-%d: ISR %v", topic, p, want), isrTimeout, func() (bool, string) {
		m, err := c.Partition(topic, p)
		if err != nil {
			return false, err.Error()
		}
		got = m
		return m.Err == nil && m.Leader >= 0 && slices.Contains(m.ISR, m.Leader) && slices.Equal(m.ISR, sorted(want)), m.String()
	})
	return got
}

// waitISRContains waits until the ISR holds id (and a leader exists).
func waitISRContains(t *testing.T, c *Cluster, topic string, p, id int32) PartitionMeta {
	t.Helper()
	var got PartitionMeta
	c.WaitFor(fmt.Sprintf("%s-%d: broker %d back in the ISR", topic, p, id), isrTimeout, func() (bool, string) {
		m, err := c.Partition(topic, p)
		if err != nil {
			return false, err.Error()
		}
		got = m
		return m.Err == nil && m.Leader >= 0 && slices.Contains(m.ISR, id), m.String()
	})
	return got
}

// waitNewLeader waits until the partition is led by a broker other than old
// with a leader epoch above oldEpoch.
func waitNewLeader(t *testing.T, c *Cluster, topic string, p, old, oldEpoch int32) PartitionMeta {
	t.Helper()
	var got PartitionMeta
	c.WaitFor(fmt.Sprintf("%s-%d: a leader other than %d", topic, p, old), electionTimeout, func() (bool, string) {
		m, err := c.Partition(topic, p)
		if err != nil {
			return false, err.Error()
		}
		got = m
		return m.Err == nil && m.Leader >= 0 && m.Leader != old && m.LeaderEpoch > oldEpoch, m.String()
	})
	return got
}

// mustPartition is c.Partition failing t on error.
func mustPartition(t *testing.T, c *Cluster, topic string, p int32) PartitionMeta {
	t.Helper()
	m, err := c.Partition(topic, p)
	if err != nil || m.Err != nil || m.Leader < 0 {
		t.Fatalf("%s-%d: %v %v", topic, p, m, err)
	}
	return m
}

// followers returns the replicas other than the leader.
func followers(m PartitionMeta) []int32 {
	var out []int32
	for _, id := range m.Replicas {
		if id != m.Leader {
			out = append(out, id)
		}
	}
	return out
}

// finishClean stops the workload and fails t on any checker anomaly or on
// an incomplete read; it also demands real traffic.
func finishClean(t *testing.T, w *Workload, minAcked int) history.Report {
	t.Helper()
	rep, err := w.Finish()
	t.Logf("history: %s", rep.Stats)
	if err != nil {
		t.Errorf("workload: %v", err)
	}
	if err := rep.Err(); err != nil {
		t.Errorf("history checker: %v", err)
	}
	if rep.Stats.Acked < minAcked {
		t.Errorf("only %d acknowledged records, want at least %d (produce errors: %s)", rep.Stats.Acked, minAcked, w.Errors())
	}
	return rep
}

// endOffset is the partition's high watermark (ListEndOffsets), retried.
func endOffset(t *testing.T, c *Cluster, adm *kadm.Client, topic string, p int32) int64 {
	t.Helper()
	var end int64
	c.WaitFor(fmt.Sprintf("end offset of %s-%d", topic, p), progressTimeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		o, ok := listed.Lookup(topic, p)
		end = o.Offset
		return ok, fmt.Sprint(listed)
	})
	return end
}

// segmentBases lists the base offsets of a partition's local segments.
func segmentBases(t *testing.T, b *Broker, topic string, p int32) []int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, l := range logs {
		base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(l), ".log"), 10, 64)
		if err == nil {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// timed logs how long a test phase took.
func timed(t *testing.T, what string) func() {
	start := time.Now()
	return func() { t.Logf("%s took %v", what, time.Since(start).Round(time.Millisecond)) }
}

// produceSync produces recs and waits for every outcome, at most timeout:
// an idempotent kgo producer never fails an in-flight record on its own,
// so a cluster that never acknowledges must not hang the test.
func produceSync(t *testing.T, cl *kgo.Client, timeout time.Duration, recs ...*kgo.Record) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cl.ProduceSync(context.Background(), recs...).FirstErr() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		cl.Close() // fails what is left, ending the goroutine
		<-done
		return fmt.Errorf("%d records not acknowledged within %v", len(recs), timeout)
	}
}

// committedPartition is one partition of an OffsetCommit answer: the
// offset its request committed, or the error it got.
type committedPartition struct {
	partition int32
	offset    int64
	err       error
}

// commitOutcomes pairs each partition of resp with the offset req
// committed for it (responses list topics in the order of the request).
func commitOutcomes(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) []committedPartition {
	var out []committedPartition
	for i, rt := range resp.Topics {
		if i >= len(req.Topics) {
			break
		}
		sent := map[int32]int64{}
		for _, p := range req.Topics[i].Partitions {
			sent[p.Partition] = p.Offset
		}
		for _, p := range rt.Partitions {
			off, ok := sent[p.Partition]
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil || ok {
				out = append(out, committedPartition{partition: p.Partition, offset: off, err: err})
			}
		}
	}
	return out
}
