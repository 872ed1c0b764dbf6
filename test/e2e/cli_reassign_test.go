package e2e

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// planJSON is what `cluster balance --json` and `broker drain --json` print.
type planJSON struct {
	Moves []struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		From      []int32 `json:"from"`
		To        []int32 `json:"to"`
	} `json:"moves"`
	Brokers []struct {
		ID             int32 `json:"id"`
		ReplicasBefore int   `json:"replicas_before"`
		ReplicasAfter  int   `json:"replicas_after"`
		LeadersBefore  int   `json:"leaders_before"`
		LeadersAfter   int   `json:"leaders_after"`
	} `json:"brokers"`
}

// checkEven fails t unless every broker but skip holds replicas and
// preferred leaderships within ±1 of the even share after the plan.
func checkEven(t *testing.T, plan planJSON, skip int32) {
	t.Helper()
	replicas, leaders, n := 0, 0, 0
	for _, b := range plan.Brokers {
		if b.ID != skip {
			replicas, leaders, n = replicas+b.ReplicasAfter, leaders+b.LeadersAfter, n+1
		}
	}
	for _, b := range plan.Brokers {
		if b.ID == skip {
			continue
		}
		if d := float64(b.ReplicasAfter) - float64(replicas)/float64(n); d < -1 || d > 1 {
			t.Errorf("broker %d: %d replicas after the plan, even share %.1f: %+v", b.ID, b.ReplicasAfter, float64(replicas)/float64(n), plan.Brokers)
		}
		if d := float64(b.LeadersAfter) - float64(leaders)/float64(n); d < -1 || d > 1 {
			t.Errorf("broker %d: leads %d after the plan, even share %.1f: %+v", b.ID, b.LeadersAfter, float64(leaders)/float64(n), plan.Brokers)
		}
	}
}

// Three brokers hold a 12-partition RF=3 topic; a fourth joins empty.
// `cluster balance --dry-run` plans 9 (±1) replicas and 3 (±1) preferred
// leaderships each, and `broker drain 1 --dry-run` plans broker 1 empty
// with the others even; neither submits anything.
func TestCLIBalanceDrainDryRun(t *testing.T) {
	etcd := clusterEtcd(t)
	common := []string{"--durability", "replication", "--offsets-topic-replication-factor", "3"}
	b1 := StartBroker(t, withArgs(common...), withEtcd(etcd))
	for id := 2; id <= 3; id++ {
		StartBroker(t, withArgs(common...), withEtcd(etcd), func(b *Broker) { b.NodeID, b.Cluster = id, b1.Cluster })
	}
	adm := b1.Admin()
	waitBrokerCount(t, b1, 3)
	resp, err := adm.CreateTopic(testCtx(t, 30*time.Second), 12, 3, nil, "orders")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create orders: %v", err)
	}
	StartBroker(t, withArgs(common...), withEtcd(etcd), func(b *Broker) { b.NodeID, b.Cluster = 4, b1.Cluster })
	waitBrokerCount(t, b1, 4)

	var balance planJSON
	decodeJSON(t, runStrata(t, "cluster", "balance", "--dry-run", "--json", "--brokers", b1.Addr), &balance)
	if len(balance.Brokers) != 4 || len(balance.Moves) == 0 {
		t.Fatalf("balance plan: %+v, want 4 brokers and moves", balance)
	}
	for _, b := range balance.Brokers {
		if b.ID == 4 && (b.ReplicasBefore != 0 || b.ReplicasAfter < 8) {
			t.Errorf("broker 4: %d → %d replicas, want 0 → 9±1", b.ReplicasBefore, b.ReplicasAfter)
		}
	}
	checkEven(t, balance, -1)
	out := runStrata(t, "cluster", "balance", "--dry-run", "--brokers", b1.Addr)
	if !strings.Contains(out, "partitions to move:") || !strings.Contains(out, "REPLICAS") {
		t.Errorf("balance table:\n%s", out)
	}
	t.Logf("cluster balance --dry-run:\n%s", out)

	var drain planJSON
	decodeJSON(t, runStrata(t, "broker", "drain", "1", "--dry-run", "--json", "--brokers", b1.Addr), &drain)
	for _, b := range drain.Brokers {
		if b.ID == 1 && (b.ReplicasBefore == 0 || b.ReplicasAfter != 0 || b.LeadersAfter != 0) {
			t.Errorf("broker 1: %d → %d replicas, leads %d after; want it empty", b.ReplicasBefore, b.ReplicasAfter, b.LeadersAfter)
		}
	}
	checkEven(t, drain, 1)
	if out := runStrata(t, "broker", "drain", "1", "--dry-run", "--brokers", b1.Addr); strings.Contains(out, "safe to stop") {
		t.Errorf("a dry run claims the broker is drained:\n%s", out)
	}
	if md, err := adm.Metadata(testCtx(t, 10*time.Second), "orders"); err != nil || len(md.Topics["orders"].Partitions[0].Replicas) != 3 {
		t.Fatalf("after dry runs: %+v %v", md.Topics["orders"], err)
	}
}

// `partition reassign` onto a broker that does not exist fails at once
// with one line, not a wait: today because the broker lacks
// AlterPartitionReassignments, once it has it because broker 7 is unknown
// (INVALID_REPLICA_ASSIGNMENT). Listing reassignments works either way.
func TestCLIReassignRefused(t *testing.T) {
	b := StartBroker(t)
	createTopic(t, b.Admin(), "moving", 1, nil)
	if out := runStrata(t, "partition", "reassignments", "--brokers", b.Addr); !strings.Contains(out, "no reassignments in progress") {
		t.Errorf("reassignments printed %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, "partition", "reassign", "--brokers", b.Addr,
		"--topic", "moving", "--partition", "0", "--replicas", "7", "--timeout", "10s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	_, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("partition reassign still running after 15s; stderr:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("partition reassign: %v, want exit status 1\n%s", err, stderr.String())
	}
	msg := stderr.String()
	if !strings.HasPrefix(msg, "strata partition: ") || strings.Count(msg, "\n") != 1 {
		t.Fatalf("stderr %q: want one line from strata partition", msg)
	}
	t.Logf("refused: %s", msg)
}

func waitBrokerCount(t *testing.T, b *Broker, n int) {
	t.Helper()
	adm := b.Admin()
	deadline := time.Now().Add(60 * time.Second)
	for {
		md, err := adm.BrokerMetadata(testCtx(t, 10*time.Second))
		if err == nil && len(md.Brokers) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata never listed %d brokers: %+v %v", n, md.Brokers, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The same cluster, for real: `cluster balance` moves replicas onto the
// fourth broker until each holds 9 (±1) replicas and leads 3 (±1), then
// `broker drain 2` empties broker 2 and says it is safe to stop; every
// record produced before reads back.
func TestCLIBalanceAndDrain(t *testing.T) {
	etcd := clusterEtcd(t)
	common := []string{"--durability", "replication", "--offsets-topic-replication-factor", "3"}
	b1 := StartBroker(t, withArgs(common...), withEtcd(etcd))
	for id := 2; id <= 3; id++ {
		StartBroker(t, withArgs(common...), withEtcd(etcd), func(b *Broker) { b.NodeID, b.Cluster = id, b1.Cluster })
	}
	adm := b1.Admin()
	waitBrokerCount(t, b1, 3)
	two := "2"
	if resp, err := adm.CreateTopic(testCtx(t, 30*time.Second), 12, 3, map[string]*string{"min.insync.replicas": &two}, "orders"); err != nil || resp.Err != nil {
		t.Fatalf("create orders: %v %v", err, resp.Err)
	}
	const records = 1200
	cl := b1.Client(kgo.DefaultProduceTopic("orders"))
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testCtx(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	StartBroker(t, withArgs(common...), withEtcd(etcd), func(b *Broker) { b.NodeID, b.Cluster = 4, b1.Cluster })
	waitBrokerCount(t, b1, 4)

	out := runStrata(t, "cluster", "balance", "--timeout", "2m", "--brokers", b1.Addr)
	t.Logf("cluster balance:\n%s", out)
	replicas, leaders := assignmentCounts(t, adm, "orders")
	for id := int32(1); id <= 4; id++ {
		if replicas[id] < 8 || replicas[id] > 10 || leaders[id] < 2 || leaders[id] > 4 {
			t.Fatalf("after balance: replicas %v, leaders %v; want 9±1 and 3±1 each", replicas, leaders)
		}
	}

	out = runStrata(t, "broker", "drain", "2", "--timeout", "2m", "--brokers", b1.Addr)
	if !strings.Contains(out, "broker 2 holds no replicas: safe to stop") {
		t.Fatalf("broker drain 2 printed:\n%s", out)
	}
	if replicas, leaders = assignmentCounts(t, adm, "orders"); replicas[2] != 0 || leaders[2] != 0 {
		t.Fatalf("after drain: replicas %v, leaders %v; want none on broker 2", replicas, leaders)
	}
	// librdkafka's view (kcat -L) has the new assignments too.
	listing := runKcat(t, testkit.NeedBinary(t, "kcat"), "", "-b", b1.Addr, "-L", "-t", "orders")
	if strings.Count(listing, "partition ") != 12 || regexp.MustCompile(`replicas: [0-9,]*\b2\b`).MatchString(listing) {
		t.Fatalf("kcat -L after draining broker 2:\n%s", listing)
	}
	consumer := b1.Client(kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	seen := map[string]bool{}
	ctx := testCtx(t, 60*time.Second)
	for len(seen) < records && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != records {
		t.Fatalf("read %d distinct records of %d after the moves", len(seen), records)
	}
}

// assignmentCounts is each broker's replicas and leaderships of topic.
func assignmentCounts(t *testing.T, adm *kadm.Client, topic string) (replicas, leaders map[int32]int) {
	t.Helper()
	md, err := adm.Metadata(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, p := range md.Topics[topic].Partitions {
		leaders[p.Leader]++
		for _, r := range p.Replicas {
			replicas[r]++
		}
	}
	return replicas, leaders
}
