package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// TestAdmin drives the admin APIs through kadm: create (plain, duplicate,
// validate-only), create partitions, describe/alter configs incrementally and
// not, delete records, delete topics.
func TestAdmin(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	ctx := testCtx(t, 2*time.Minute)
	const topic = "admin"

	createTopic(t, adm, topic, 2, map[string]string{"retention.ms": "3600000"})
	if resp, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err == nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate create: %v, want TOPIC_ALREADY_EXISTS", resp.Err)
	}
	vresp, err := adm.ValidateCreateTopics(ctx, 3, 1, nil, "validate-only")
	if err != nil || vresp.Error() != nil {
		t.Fatalf("validate-only create: %v %v", err, vresp.Error())
	}
	if topicExists(t, adm, "validate-only") {
		t.Fatalf("validate-only create made the topic")
	}

	cp, err := adm.CreatePartitions(ctx, 3, topic) // add 3: 2 → 5
	if err != nil || cp.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, cp.Error())
	}
	testkit.WaitFor(t, 30*time.Second, "5 partitions in metadata", func() bool { return partitionCount(t, adm, topic) == 5 })
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, cl, &kgo.Record{Topic: topic, Partition: 4, Value: []byte("new partition")})

	checkAlterConfigs(t, adm, topic)
	checkDeleteRecords(t, b, adm, cl, topic)

	dr, err := adm.DeleteTopics(ctx, topic)
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete topic: %v %v", err, dr.Error())
	}
	testkit.WaitFor(t, 30*time.Second, "deleted topic to vanish", func() bool { return !topicExists(t, adm, topic) })
	createTopic(t, adm, topic, 1, nil) // the name is free again
	testkit.WaitFor(t, 30*time.Second, "re-created topic with 1 partition in metadata", func() bool { return partitionCount(t, adm, topic) == 1 })
	if end := endOffsets(t, adm, topic)[0]; end != 0 {
		t.Fatalf("re-created topic starts at end offset %d, want 0 (old data survived)", end)
	}
}

func topicDetail(t testing.TB, adm *kadm.Client, topic string) (kadm.TopicDetail, bool) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	td, ok := tds[topic]
	return td, ok && td.Err == nil
}

func topicExists(t testing.TB, adm *kadm.Client, topic string) bool {
	_, ok := topicDetail(t, adm, topic)
	return ok
}

func partitionCount(t testing.TB, adm *kadm.Client, topic string) int {
	td, _ := topicDetail(t, adm, topic)
	return len(td.Partitions)
}

// describedConfig returns the value and source of one topic config.
func describedConfig(t testing.TB, adm *kadm.Client, topic, key string) (string, string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue(), c.Source.String()
		}
	}
	t.Fatalf("describe configs %s: no %s among %d configs", topic, key, len(rc.Configs))
	return "", ""
}

func wantConfig(t testing.TB, adm *kadm.Client, topic, key, value, source string) {
	t.Helper()
	v, s := describedConfig(t, adm, topic, key)
	if v != value || s != source {
		t.Fatalf("%s %s = %q (%s), want %q (%s)", topic, key, v, s, value, source)
	}
}

// checkAlterConfigs: incremental set/delete changes only the named keys;
// non-incremental AlterConfigs replaces the whole override set.
func checkAlterConfigs(t *testing.T, adm *kadm.Client, topic string) {
	ctx := testCtx(t, 30*time.Second)
	wantConfig(t, adm, topic, "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG")
	wantConfig(t, adm, topic, "cleanup.policy", "delete", "DEFAULT_CONFIG")

	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("2097152")},
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("99999999")},
	}, topic)
	err = alterErr(resp, err, topic)
	if err != nil {
		t.Fatalf("incremental alter: %v", err)
	}
	wantConfig(t, adm, topic, "segment.bytes", "2097152", "DYNAMIC_TOPIC_CONFIG")
	wantConfig(t, adm, topic, "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG")

	resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.bytes"}}, topic)
	err = alterErr(resp, err, topic)
	if err != nil {
		t.Fatalf("incremental delete: %v", err)
	}
	wantConfig(t, adm, topic, "retention.bytes", "-1", "DEFAULT_CONFIG")

	bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("not-a-number")}}, topic)
	err = alterErr(bad, err, topic)
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("alter retention.ms=not-a-number: %v, want INVALID_CONFIG", err)
	}

	// Non-incremental: the new set replaces every override.
	state, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("500000")}}, topic)
	err = alterErr(state, err, topic)
	if err != nil {
		t.Fatalf("non-incremental alter: %v", err)
	}
	wantConfig(t, adm, topic, "max.message.bytes", "500000", "DYNAMIC_TOPIC_CONFIG")
	wantConfig(t, adm, topic, "retention.ms", "604800000", "DEFAULT_CONFIG")
	wantConfig(t, adm, topic, "segment.bytes", "1073741824", "DEFAULT_CONFIG")
}

// alterErr folds the request error and the topic's own error of an alter.
func alterErr(resp kadm.AlterConfigsResponses, err error, topic string) error {
	if err != nil {
		return err
	}
	r, err := resp.On(topic, nil)
	if err != nil {
		return err
	}
	return r.Err
}

// checkDeleteRecords: DeleteRecords moves the low watermark, ListOffsets
// earliest agrees, and reads below it fail.
func checkDeleteRecords(t *testing.T, b *Broker, adm *kadm.Client, cl *kgo.Client, topic string) {
	ctx := testCtx(t, 30*time.Second)
	var rs []*kgo.Record
	for i := 0; i < 100; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "d%d", i)})
	}
	produceSync(t, cl, rs...)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 40})
	dr, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	r, ok := dr.Lookup(topic, 0)
	if !ok || r.Err != nil || r.LowWatermark != 40 {
		t.Fatalf("delete records: %+v (found %v), want low watermark 40", r, ok)
	}
	if start := startOffsets(t, adm, topic)[0]; start != 40 {
		t.Fatalf("earliest after DeleteRecords(40) = %d, want 40", start)
	}
	if p := fetchPartition(t, b, topic, 10); kerr.ErrorForCode(p.ErrorCode) != kerr.OffsetOutOfRange {
		t.Fatalf("fetch at 10 below low watermark 40: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(p.ErrorCode))
	}
	got := consumeRange(t, b, topic, 0, 40, 41)
	if got[0].Offset != 40 || string(got[0].Value) != "d40" {
		t.Fatalf("read at low watermark: offset %d %q, want 40 \"d40\"", got[0].Offset, got[0].Value)
	}
}
