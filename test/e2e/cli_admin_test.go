package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// topic add-partitions raises the count to the total given, as kadm then
// sees it, and a smaller total is refused with the broker's reason.
func TestCLITopicAddPartitions(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, "grow", 2, nil)
	if out := runStrata(t, "topic", "add-partitions", "--brokers", b.Addr, "grow", "--partitions", "5"); !strings.Contains(out, "grow now has 5 partitions") {
		t.Fatalf("add-partitions printed %q", out)
	}
	topics, err := adm.ListTopics(testCtx(t, 10*time.Second), "grow")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(topics["grow"].Partitions); n != 5 {
		t.Fatalf("after add-partitions to 5, kadm sees %d partitions", n)
	}
	stderr := runStrataFailing(t, "topic", "add-partitions", "--brokers", b.Addr, "grow", "--partitions", "3")
	if !strings.Contains(stderr, "grow: INVALID_PARTITIONS") || !strings.Contains(stderr, "has 5 partitions") {
		t.Fatalf("shrinking printed:\n%s\nwant the code and the broker's reason naming the current count", stderr)
	}

	var listed []struct {
		Topic      string `json:"topic"`
		ID         string `json:"id"`
		Partitions int    `json:"partitions"`
	}
	decodeJSON(t, runStrata(t, "topic", "list", "--brokers", b.Addr, "--json"), &listed)
	if len(listed) != 1 || listed[0].Topic != "grow" || listed[0].Partitions != 5 || listed[0].ID == "" {
		t.Fatalf("topic list --json: %+v, want grow with 5 partitions and its id", listed)
	}
	var described []struct {
		Topic      string `json:"topic"`
		Partitions []struct {
			Partition int32   `json:"partition"`
			Leader    int32   `json:"leader"`
			Replicas  []int32 `json:"replicas"`
			EndOffset int64   `json:"end_offset"`
		} `json:"partitions"`
		Configs []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"configs"`
	}
	decodeJSON(t, runStrata(t, "topic", "describe", "--brokers", b.Addr, "--json", "grow"), &described)
	if len(described) != 1 || len(described[0].Partitions) != 5 || described[0].Partitions[4].Leader != int32(b.NodeID) ||
		len(described[0].Configs) == 0 {
		t.Fatalf("topic describe --json: %+v, want 5 partitions led by broker %d and the configs", described, b.NodeID)
	}
}

// cluster info names the broker with its address, the finalized
// transaction.version and a healthy count of partitions, as a table and as
// JSON.
func TestCLIClusterInfo(t *testing.T) {
	b := StartBroker(t)
	createTopic(t, b.Admin(), "info", 3, nil)
	out := runStrata(t, "cluster", "info", "--brokers", b.Addr)
	row := regexp.MustCompile(fmt.Sprintf(`(?m)^\s+%d\s+%s\s`, b.NodeID, regexp.QuoteMeta(b.Addr)))
	for _, want := range []*regexp.Regexp{
		row,
		regexp.MustCompile(fmt.Sprintf(`(?m)^controller:\s+%d$`, b.NodeID)),
		regexp.MustCompile(`(?m)^health:\s+0 under-replicated, 0 offline partitions$`),
		regexp.MustCompile(`(?m)^topics:\s+\d+ \(\d+ internal\), \d+ partitions$`),
		regexp.MustCompile(`transaction\.version=\d`),
	} {
		if !want.MatchString(out) {
			t.Errorf("cluster info lacks %s:\n%s", want, out)
		}
	}

	var info struct {
		ClusterID  string `json:"cluster_id"`
		Controller int32  `json:"controller"`
		Brokers    []struct {
			ID   int32  `json:"id"`
			Host string `json:"host"`
			Port int32  `json:"port"`
			APIs []struct {
				Name string `json:"name"`
				Max  int16  `json:"max"`
			} `json:"api_versions"`
		} `json:"brokers"`
		Features []struct {
			Name           string `json:"name"`
			FinalizedLevel *int16 `json:"finalized_level"`
		} `json:"features"`
		Partitions      int               `json:"partitions"`
		UnderReplicated []json.RawMessage `json:"under_replicated_partitions"`
		Offline         []json.RawMessage `json:"offline_partitions"`
	}
	decodeJSON(t, runStrata(t, "cluster", "info", "--brokers", b.Addr, "--json"), &info)
	if info.ClusterID == "" || info.Controller != int32(b.NodeID) || len(info.Brokers) != 1 ||
		fmt.Sprintf("%s:%d", info.Brokers[0].Host, info.Brokers[0].Port) != b.Addr || len(info.Brokers[0].APIs) == 0 {
		t.Errorf("cluster info --json: %+v; want a cluster id and broker %d at %s as controller with its APIs", info, b.NodeID, b.Addr)
	}
	if info.Partitions < 3 || info.UnderReplicated == nil || len(info.UnderReplicated) != 0 || info.Offline == nil || len(info.Offline) != 0 {
		t.Errorf("cluster info --json: %d partitions, under-replicated %v, offline %v; want at least 3 and two empty arrays",
			info.Partitions, info.UnderReplicated, info.Offline)
	}
	finalized := false
	for _, f := range info.Features {
		finalized = finalized || f.Name == "transaction.version" && f.FinalizedLevel != nil
	}
	if !finalized {
		t.Errorf("cluster info --json features %+v: want transaction.version finalized", info.Features)
	}
}

// cluster config set changes a dynamic broker config, cluster-wide or on
// one broker (whose own value wins), describe shows each level's source,
// and delete restores the static value. A config that is not dynamic is
// refused with the broker's reason.
func TestCLIClusterConfig(t *testing.T) {
	b := StartBroker(t)
	broker := fmt.Sprint(b.NodeID)
	const key = "log.cleaner.backoff.ms"
	static := configLine(t, b, broker, key)
	if !strings.Contains(static, "static_broker_config") {
		t.Fatalf("before any change %s is %q, want static_broker_config", key, static)
	}

	runStrata(t, "cluster", "config", "set", "--brokers", b.Addr, key+"=12345")
	if line := configLine(t, b, "", key); !strings.Contains(line, "12345") || !strings.Contains(line, "dynamic_default_broker_config") {
		t.Errorf("cluster-wide %s after set: %q", key, line)
	}
	if line := configLine(t, b, broker, key); !regexp.MustCompile(`\s12345\s+dynamic_default_broker_config\s+yes\s`).MatchString(line) {
		t.Errorf("broker %s's %s after a cluster-wide set: %q, want 12345 from dynamic_default_broker_config", broker, key, line)
	}
	runStrata(t, "cluster", "config", "--broker", broker, "set", "--brokers", b.Addr, key+"=23456")
	if line := configLine(t, b, broker, key); !regexp.MustCompile(`\s23456\s+dynamic_broker_config\s.*12345 \(dynamic_default_broker_config\)`).MatchString(line) {
		t.Errorf("broker %s's %s after a per-broker set: %q, want 23456 over the cluster-wide 12345", broker, key, line)
	}

	var configs []struct {
		Name    string  `json:"name"`
		Value   *string `json:"value"`
		Source  string  `json:"source"`
		Dynamic bool    `json:"dynamic"`
	}
	decodeJSON(t, runStrata(t, "cluster", "config", "--brokers", b.Addr, "--broker", broker, "--json"), &configs)
	found := false
	for _, c := range configs {
		if c.Name == key {
			found = c.Value != nil && *c.Value == "23456" && c.Source == "dynamic_broker_config" && c.Dynamic
		}
	}
	if !found {
		t.Errorf("cluster config --json lacks %s=23456 from dynamic_broker_config: %+v", key, configs)
	}

	runStrata(t, "cluster", "config", "delete", "--brokers", b.Addr, "--broker", broker, key)
	runStrata(t, "cluster", "config", "delete", "--brokers", b.Addr, key)
	if line := configLine(t, b, broker, key); line != static {
		t.Errorf("after both deletes %s is %q, want the static %q back", key, line, static)
	}
	if out := runStrata(t, "cluster", "config", "--brokers", b.Addr); !strings.Contains(out, "none set") {
		t.Errorf("cluster-wide configs after the delete:\n%s", out)
	}

	stderr := runStrataFailing(t, "cluster", "config", "set", "--brokers", b.Addr, "--broker", broker, "num.partitions=3")
	if !strings.Contains(stderr, "broker "+broker+": INVALID_REQUEST") || !strings.Contains(stderr, `cannot update "num.partitions" dynamically`) {
		t.Errorf("setting a static config printed:\n%s\nwant the broker's reason", stderr)
	}
}

// configLine is key's row in `cluster config` of resource ("" : the
// cluster-wide defaults), or "" if absent.
func configLine(t *testing.T, b *Broker, resource, key string) string {
	t.Helper()
	args := []string{"cluster", "config", "--brokers", b.Addr}
	if resource != "" {
		args = append(args, "--broker", resource)
	}
	for _, line := range strings.Split(runStrata(t, args...), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == key {
			return line
		}
	}
	return ""
}

// txn list and describe show an open transaction with its producer and
// partitions, and the leaders' view of the producer's first offset in it;
// after the commit the state is CompleteCommit with no partitions.
func TestCLITxnListDescribe(t *testing.T) {
	b := StartBroker(t)
	const topic, txnID = "cli-txn", "cli-admin-txn"
	createTopic(t, b.Admin(), topic, 2, nil)
	cl := txnClient(t, b, txnID, kgo.TransactionTimeout(40*time.Second))
	// A committed transaction first (a record and its marker on each
	// partition), so the open one starts at offset 2, distinct from the
	// producer id and epoch in the table's columns.
	runTxn(t, cl, true, txnRecords(topic, "warmup", 2, 2)...)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, txnRecords(topic, "open", 4, 2)...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	listRow := regexp.MustCompile(fmt.Sprintf(`(?m)^%s\s+%d\s+Ongoing\s+%d$`, txnID, pid, b.NodeID))
	if out := runStrata(t, "txn", "list", "--brokers", b.Addr); !listRow.MatchString(out) {
		t.Errorf("txn list lacks %s, producer %d, Ongoing, coordinator %d:\n%s", txnID, pid, b.NodeID, out)
	}
	var listed []struct {
		ID    string `json:"transactional_id"`
		PID   int64  `json:"producer_id"`
		State string `json:"state"`
	}
	decodeJSON(t, runStrata(t, "txn", "list", "--brokers", b.Addr, "--json", "--state", "Ongoing"), &listed)
	if len(listed) != 1 || listed[0].ID != txnID || listed[0].PID != pid || listed[0].State != "Ongoing" {
		t.Errorf("txn list --json --state Ongoing: %+v", listed)
	}

	out := runStrata(t, "txn", "describe", "--brokers", b.Addr, txnID)
	for _, want := range []string{
		fmt.Sprintf(`transaction %s\s+state Ongoing\s+coordinator %d`, txnID, b.NodeID),
		fmt.Sprintf(`producer id %d\s+epoch %d\s+timeout 40s\s+started \d{4}-`, pid, epoch),
		fmt.Sprintf(`(?m)^\s+%s\s+0\s+%d\s+%d\s+2\s`, topic, pid, epoch), // partition 0, the transaction from offset 2
		fmt.Sprintf(`(?m)^\s+%s\s+1\s+%d\s+%d\s+2\s`, topic, pid, epoch),
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("txn describe lacks %s:\n%s", want, out)
		}
	}
	var described []struct {
		State      string `json:"state"`
		PID        int64  `json:"producer_id"`
		TimeoutMs  int32  `json:"timeout_ms"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Producers []struct {
				PID      int64 `json:"producer_id"`
				StartsAt int64 `json:"current_txn_start_offset"`
			} `json:"active_producers"`
		} `json:"partitions"`
	}
	decodeJSON(t, runStrata(t, "txn", "describe", "--brokers", b.Addr, "--json", txnID), &described)
	if len(described) != 1 || described[0].State != "Ongoing" || described[0].PID != pid || described[0].TimeoutMs != 40000 ||
		len(described[0].Partitions) != 2 {
		t.Fatalf("txn describe --json: %+v", described)
	}
	for _, p := range described[0].Partitions {
		if len(p.Producers) != 1 || p.Producers[0].PID != pid || p.Producers[0].StartsAt != 2 {
			t.Errorf("txn describe --json partition %d: producers %+v, want %d with its transaction from offset 2", p.Partition, p.Producers, pid)
		}
	}

	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "txn describe to show CompleteCommit", func() bool {
		out = runStrata(t, "txn", "describe", "--brokers", b.Addr, txnID)
		return strings.Contains(out, "state CompleteCommit") && strings.Contains(out, "no partitions in the transaction")
	})
	if out := runStrata(t, "txn", "list", "--brokers", b.Addr, "--state", "Ongoing"); strings.Contains(out, txnID) {
		t.Errorf("after the commit, txn list --state Ongoing still shows %s:\n%s", txnID, out)
	}
	if stderr := runStrataFailing(t, "txn", "describe", "--brokers", b.Addr, "nosuch-txn"); !strings.Contains(stderr, "nosuch-txn: TRANSACTIONAL_ID_NOT_FOUND") {
		t.Errorf("describing an unknown transactional id printed:\n%s", stderr)
	}
}

// The new command groups list their verbs on -h.
func TestCLIAdminHelp(t *testing.T) {
	for group, verbs := range map[string][]string{"cluster": {"info", "config"}, "txn": {"list", "describe"}, "topic": {"add-partitions"}} {
		out := runStrata(t, group, "-h")
		for _, v := range verbs {
			if !strings.Contains(out, "  "+v+" ") {
				t.Errorf("strata %s -h lacks %s:\n%s", group, v, out)
			}
		}
	}
}

func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, out)
	}
}
