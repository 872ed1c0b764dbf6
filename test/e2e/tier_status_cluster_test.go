package e2e

// `strata tier status` across a cluster: three tiered brokers on one MinIO
// and etcd, an RF=3 topic with data in the bucket. Any broker's HTTP port
// answers for all of them (each broker registers its HTTP address); the
// leader's row of each partition is the one shown, --replicas shows every
// broker's, and a killed broker is reported on stderr while the others'
// rows still print.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// clusterTierRow is the part of a `strata tier status --json` row (and of
// a /v1/tier/status?scope=cluster row) read here.
type clusterTierRow struct {
	Node        int32   `json:"node"`
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      bool    `json:"leader"`
	Tiered      bool    `json:"tiered"`
	TieredBytes int64   `json:"tieredBytes"`
	UploadLag   int64   `json:"uploadLagBytes"`
	Replicas    []int32 `json:"replicas"`
}

type clusterTierJSON struct {
	Partitions  []clusterTierRow `json:"partitions"`
	Unreachable []struct {
		Node  int32  `json:"node"`
		HTTP  string `json:"http"`
		Error string `json:"error"`
	} `json:"unreachable"`
}

// runStrataStatus runs a strata client command and returns its stdout,
// stderr and exit error.
func runStrataStatus(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	return string(out), errOut.String(), err
}

func TestTierStatusCluster(t *testing.T) {
	m := tiertest.StartMinIO(t)
	etcd := clusterEtcd(t)
	// No upload time bound: once production stops, what is in the bucket
	// stays put, so the brokers' views can be compared. A long lease keeps
	// a killed broker registered (and so reported) while the test looks.
	args := []string{"--object-store", m.URL(tierBucketPrefix), "--tier-upload-interval", "250ms",
		"--tier-upload-max-lag", "-1s", "--durability", "replication", "--lease-ttl", "60s",
		"--offsets-topic-replication-factor", "1"}
	b1 := StartBroker(t, withEtcd(etcd), withArgs(args...))
	brokers := []*Broker{b1}
	for id := 2; id <= 3; id++ {
		brokers = append(brokers, StartBroker(t, withEtcd(etcd), withArgs(args...),
			func(b *Broker) { b.NodeID, b.Cluster = id, b1.Cluster }))
	}
	const (
		topic      = "tiered-rf3"
		partitions = 3
	)
	adm := b1.Admin()
	waitLiveBrokers(t, adm, 3)
	ctx := testCtx(t, 2*time.Minute)
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{
		"internal.segment.bytes": kadm.StringPtr("262144"), "local.retention.bytes": kadm.StringPtr("-1")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	leaders := produceToAll(t, b1, adm, topic, partitions, 1<<20)
	// Every partition's leader uploaded its sealed segments.
	var cluster clusterTierJSON
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last cluster tier status: %+v", cluster)
		}
	})
	testkit.WaitFor(t, 60*time.Second, "every partition's sealed segments in the bucket", func() bool {
		cluster = clusterTierStatusJSON(t, b1.HTTPAddr, topic)
		uploaded := 0
		for _, r := range cluster.Partitions {
			if r.Leader && r.Tiered && r.TieredBytes > 0 && r.UploadLag == 0 {
				uploaded++
			}
		}
		return uploaded == partitions && len(cluster.Partitions) == 3*partitions
	})

	// Default view: one row per partition, its leader's, with the tiered
	// bytes the leader itself reports.
	out, stderr, err := runStrataStatus(t, "tier", "status", "--http", b1.HTTPAddr, "--topic", topic)
	if err != nil || stderr != "" {
		t.Fatalf("tier status: %v\n%s\n%s", err, out, stderr)
	}
	if !strings.Contains(out, "LEADER") || !strings.Contains(out, "REPLICAS") || strings.Count(out, "\n"+topic+" ") != partitions {
		t.Fatalf("tier status: want one row per partition:\n%s", out)
	}
	for p := int32(0); p < partitions; p++ {
		if !regexp.MustCompile(fmt.Sprintf(`\n%s\s+%d\s+%d\s+1,2,3\s`, topic, p, leaders[p])).MatchString(out) {
			t.Errorf("partition %d: want leader %d and replicas 1,2,3:\n%s", p, leaders[p], out)
		}
	}
	jsonOut, _, err := runStrataStatus(t, "tier", "status", "--http", b1.HTTPAddr, "--topic", topic, "--json")
	if err != nil {
		t.Fatalf("tier status --json: %v", err)
	}
	var shown clusterTierJSON
	if err := json.Unmarshal([]byte(jsonOut), &shown); err != nil || len(shown.Partitions) != partitions || shown.Unreachable == nil ||
		len(shown.Unreachable) != 0 {
		t.Fatalf("tier status --json: %v\n%s", err, jsonOut)
	}
	for _, r := range shown.Partitions {
		own := brokerTierRow(t, brokers[leaders[r.Partition]-1].HTTPAddr, topic, r.Partition)
		if r.Node != leaders[r.Partition] || !r.Leader || r.TieredBytes != own.TieredBytes || r.TieredBytes == 0 || len(r.Replicas) != 3 {
			t.Errorf("partition %d: row %+v, want the leader %d's with its %d tiered bytes", r.Partition, r, leaders[r.Partition], own.TieredBytes)
		}
	}

	// --replicas: every broker's row.
	out, _, err = runStrataStatus(t, "tier", "status", "--http", b1.HTTPAddr, "--topic", topic, "--replicas")
	if err != nil || !strings.Contains(out, "BROKER") || strings.Count(out, "\n"+topic+" ") != 3*partitions ||
		strings.Count(out, " leader ") != partitions {
		t.Fatalf("tier status --replicas: %v\n%s", err, out)
	}
	// --broker-only: the asked broker's own rows, as before.
	out, _, err = runStrataStatus(t, "tier", "status", "--http", brokers[1].HTTPAddr, "--topic", topic, "--broker-only", "--json")
	var own []clusterTierRow
	if err != nil || json.Unmarshal([]byte(out), &own) != nil || len(own) != partitions {
		t.Fatalf("tier status --broker-only --json: %v\n%s", err, out)
	}

	// Kill broker 3: still registered (the lease outlives the test's look),
	// it is reported, and the others' rows print; the command succeeds.
	brokers[2].Kill()
	out, stderr, err = runStrataStatus(t, "tier", "status", "--http", b1.HTTPAddr, "--topic", topic)
	if err != nil {
		t.Fatalf("tier status with a broker down: %v\n%s\n%s", err, out, stderr)
	}
	if !regexp.MustCompile(`warning: broker 3 \(127\.0\.0\.1:\d+\): no answer: `).MatchString(stderr) {
		t.Errorf("tier status with broker 3 down: no warning naming it:\n%s", stderr)
	}
	if strings.Count(out, "\n"+topic+" ") != partitions {
		t.Errorf("tier status with broker 3 down: want every partition still listed:\n%s", out)
	}
	for p := int32(0); p < partitions; p++ {
		if leaders[p] != 3 && !regexp.MustCompile(fmt.Sprintf(`\n%s\s+%d\s+%d\s+1,2\s`, topic, p, leaders[p])).MatchString(out) {
			t.Errorf("partition %d: want leader %d's row from replicas 1,2:\n%s", p, leaders[p], out)
		}
	}
	// Nobody answers: the command fails.
	closed := testkit.FreeAddr(t)
	if _, _, err := runStrataStatus(t, "tier", "status", "--http", closed); !isExit(err, 1) {
		t.Errorf("tier status with no broker answering: %v, want exit status 1", err)
	}
}

// waitLiveBrokers waits until Metadata lists n brokers.
func waitLiveBrokers(t *testing.T, adm *kadm.Client, n int) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("%d live brokers", n), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		meta, err := adm.Metadata(ctx)
		return err == nil && len(meta.Brokers) == n
	})
}

// produceToAll writes about bytesPerPartition to every partition with
// acks=all and returns each partition's leader.
func produceToAll(t *testing.T, b *Broker, adm *kadm.Client, topic string, partitions int32, bytesPerPartition int) map[int32]int32 {
	t.Helper()
	leaders := map[int32]int32{}
	testkit.WaitFor(t, 30*time.Second, "every partition led with a full ISR", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		meta, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		for p := int32(0); p < partitions; p++ {
			pm, ok := meta.Topics[topic].Partitions[p]
			if !ok || pm.Leader < 1 || len(pm.ISR) != 3 {
				return false
			}
			leaders[p] = pm.Leader
		}
		return true
	})
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testCtx(t, time.Minute)
	var records []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < bytesPerPartition/tierValueSize; i++ {
			records = append(records, &kgo.Record{Topic: topic, Partition: p, Value: tierValue(p, int64(i))})
		}
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return leaders
}

// clusterTierStatusJSON reads /v1/tier/status?scope=cluster from addr.
func clusterTierStatusJSON(t *testing.T, addr, topic string) clusterTierJSON {
	t.Helper()
	var out clusterTierJSON
	getJSON(t, "http://"+addr+"/v1/tier/status?scope=cluster&topic="+topic, &out)
	return out
}

// brokerTierRow is one broker's own status of a partition.
func brokerTierRow(t *testing.T, addr, topic string, partition int32) clusterTierRow {
	t.Helper()
	var rows []clusterTierRow
	getJSON(t, "http://"+addr+"/v1/tier/status?topic="+topic, &rows)
	for _, r := range rows {
		if r.Partition == partition {
			return r
		}
	}
	t.Fatalf("%s: no row of %s-%d", addr, topic, partition)
	return clusterTierRow{}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	client := http.Client{Timeout: 15 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// isExit: err is an exit with status code.
func isExit(err error, code int) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && exit.ExitCode() == code
}
