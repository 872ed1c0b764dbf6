package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumer848OfflineUpgradeAndDowngrade: an empty classic
// group switches to the consumer protocol and back, as Kafka allows
// offline: each generation of consumers goes on from the offsets the
// previous one committed, under the same group id, and the group reports
// the protocol of its current members.
func TestConsumer848OfflineUpgradeAndDowngrade(t *testing.T) {
	b := StartBroker(t, withArgs("--group-consumer-heartbeat-interval", "300ms", "--group-consumer-session-timeout", "10s",
		"--group-initial-rebalance-delay", "100ms", "--offsets-topic-num-partitions", "4"))
	adm := b.Admin()
	const topic, group, per = "upgrade848", "upgrade848-g", 60
	createTopic(t, adm, topic, 4, nil)
	producer := b.Client(kgo.DefaultProduceTopic(topic))
	for i, round := range []struct {
		tag  string
		next bool // the consumer protocol
		kind string
	}{
		{tag: "classic-1", kind: "classic"},
		{tag: "consumer", next: true, kind: "consumer"},
		{tag: "classic-2", kind: "classic"},
	} {
		for j := range per {
			r := &kgo.Record{Value: []byte(fmt.Sprintf("%s/%d", round.tag, j))}
			if err := producer.ProduceSync(testCtx(t, 30*time.Second), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6 * time.Second)}
		if round.next {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		readRound(t, cl, round.tag, per)
		if kind := groupType(t, adm, group); kind != round.kind {
			t.Fatalf("round %d: group type %q while %s consumers are in it, want %q", i, kind, round.tag, round.kind)
		}
		if err := cl.CommitUncommittedOffsets(testCtx(t, 30*time.Second)); err != nil {
			t.Fatalf("round %d commit: %v", i, err)
		}
		cl.Close() // leaves: the group is empty for the next protocol
	}
	offsets, err := adm.FetchOffsets(testCtx(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 3*per {
		t.Fatalf("committed offsets sum to %d after three rounds, want %d", total, 3*per)
	}
}

// readRound reads until it has every record of tag, failing on a record of
// an earlier round (the committed offsets were not honoured).
func readRound(t *testing.T, cl *kgo.Client, tag string, n int) {
	t.Helper()
	seen := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: read %d of %d records", tag, len(seen), n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if !strings.HasPrefix(v, tag+"/") {
				t.Errorf("%s consumers read %q: an earlier round's record, the committed offsets were lost", tag, v)
			}
			seen[v] = true
		})
		if t.Failed() {
			t.FailNow()
		}
	}
}

// groupType is ListGroups v5's type of group ("classic", "consumer").
func groupType(t *testing.T, adm *kadm.Client, group string) string {
	t.Helper()
	listed, err := adm.ListGroups(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return listed[group].GroupType
}
