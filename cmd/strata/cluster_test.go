package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A partition without a leader is offline (and not also under-replicated);
// one whose ISR is smaller than its replicas is under-replicated; topics
// that failed to load are not counted.
func TestClusterHealth(t *testing.T) {
	topics := kadm.TopicDetails{
		"ok": {Topic: "ok", Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
			1: {Partition: 1, Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{2}},
		}},
		"__consumer_offsets": {Topic: "__consumer_offsets", IsInternal: true, Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{}},
			1: {Partition: 1, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Err: kerr.LeaderNotAvailable},
		}},
		"broken": {Topic: "broken", Err: kerr.UnknownTopicOrPartition},
	}
	var info clusterInfo
	info.addHealth(topics)
	if info.Topics != 2 || info.InternalTopics != 1 || info.Partitions != 4 {
		t.Errorf("counted %d topics (%d internal), %d partitions; want 2 (1), 4", info.Topics, info.InternalTopics, info.Partitions)
	}
	wantOffline := []partitionRef{{"__consumer_offsets", 0}, {"__consumer_offsets", 1}}
	if !equalRefs(info.Offline, wantOffline) {
		t.Errorf("offline %v, want %v", info.Offline, wantOffline)
	}
	if want := []partitionRef{{"ok", 1}}; !equalRefs(info.UnderReplicated, want) {
		t.Errorf("under-replicated %v, want %v", info.UnderReplicated, want)
	}
}

func equalRefs(a, b []partitionRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A feature is finalized only when the broker has loaded the levels
// (epoch >= 0) and lists it.
func TestClusterFeatures(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "transaction.version", MinVersion: 0, MaxVersion: 2}}
	resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}}
	resp.FinalizedFeaturesEpoch = 7
	got := features(resp)
	if len(got) != 1 || got[0].FinalizedLevel == nil || *got[0].FinalizedLevel != 2 || got[0].MaxSupported != 2 {
		t.Fatalf("features: %+v", got)
	}
	if s := featureSummary(got); s != "transaction.version=2 (supported 0-2)" {
		t.Errorf("summary %q", s)
	}
	resp.FinalizedFeaturesEpoch = -1
	if got := features(resp); got[0].FinalizedLevel != nil {
		t.Errorf("with epoch -1 the level is %d, want none", *got[0].FinalizedLevel)
	}
}

func TestBrokerConfigAlters(t *testing.T) {
	alters, err := brokerConfigAlters("set", []string{"max.connections=10", "log.cleaner.backoff.ms="})
	if err != nil || len(alters) != 2 || alters[0].Op != kadm.SetConfig || *alters[0].Value != "10" || *alters[1].Value != "" {
		t.Errorf("set: %+v, %v", alters, err)
	}
	alters, err = brokerConfigAlters("delete", []string{"max.connections"})
	if err != nil || len(alters) != 1 || alters[0].Op != kadm.DeleteConfig || alters[0].Value != nil {
		t.Errorf("delete: %+v, %v", alters, err)
	}
	for _, bad := range []struct {
		action string
		items  []string
	}{{"set", nil}, {"set", []string{"max.connections"}}, {"delete", []string{"max.connections=1"}}, {"set", []string{"=1"}}} {
		if _, err := brokerConfigAlters(bad.action, bad.items); !errors.Is(err, errUsage) {
			t.Errorf("%s %v: %v, want a usage error", bad.action, bad.items, err)
		}
	}
}

// The broker's message replaces the code's description, and the code stays
// in the chain.
func TestWithMessage(t *testing.T) {
	err := withMessage(kerr.InvalidPartitions, `topic "t" has 4 partitions; the new count 3 must be larger`)
	if got := err.Error(); got != `INVALID_PARTITIONS: topic "t" has 4 partitions; the new count 3 must be larger` {
		t.Errorf("got %q", got)
	}
	if !errors.Is(err, kerr.InvalidPartitions) {
		t.Error("the code is not in the chain")
	}
	if err := withMessage(kerr.InvalidPartitions, ""); err != kerr.InvalidPartitions {
		t.Errorf("no message: %v", err)
	}
}

// An open transaction shows its timeout and start in human units and one
// row per active producer; a partition without producers shows a dash.
func TestPrintTxns(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := now.Add(-90 * time.Second).UnixMilli()
	txns := []describedTxn{{TransactionalID: "app", Coordinator: 1, State: "Ongoing", ProducerID: 42, ProducerEpoch: 3,
		TimeoutMillis: 60000, StartTimestampMillis: started, Partitions: []txnPartition{
			{Topic: "orders", Partition: 0, ActiveProducers: []activeProducer{{ProducerID: 42, ProducerEpoch: 3,
				LastSequence: 9, LastTimestampMillis: started, CurrentTxnStartOffset: 17}}},
			{Topic: "orders", Partition: 1, ActiveProducers: []activeProducer{}},
		}}}
	var out bytes.Buffer
	if err := printTxns(&out, txns, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"transaction app  state Ongoing  coordinator 1",
		"producer id 42  epoch 3  timeout 1m  started 2026-01-02T03:02:35Z (1m30s ago)",
		"orders  0          42           3      17                9",
		"orders  1          -",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}
}
