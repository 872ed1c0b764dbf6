package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// `strata group lag`, and the RETENTION columns of `group describe` and
// `group list`, against a real broker: a group 60 records behind on a topic
// with retention.ms of an hour, a group whose committed offset retention
// already deleted (DeleteRecords), a group on a compact-only topic, and two
// groups far apart on one partition.

const (
	lagCLITopic        = "lagcli"
	lagCLIGroup        = "lagcli-group"
	lagCLILostTopic    = "lagcli-lost"
	lagCLILostGroup    = "lagcli-lost-group"
	lagCLICompactTopic = "lagcli-compact"
	lagCLICompactGroup = "lagcli-compact-group"
	// Two groups far apart on one partition of large records: more than a
	// fetch apart, so reading the record at each takes a jump.
	lagCLIWideTopic   = "lagcli-wide"
	lagCLIWideFirst   = "lagcli-wide-a"
	lagCLIWideLast    = "lagcli-wide-b"
	lagCLIRecords     = 100
	lagCLIConsumed    = 40
	lagCLILogStart    = 50 // DeleteRecords on the lost topic
	lagCLIRetentionMs = 3_600_000
)

// lagCLIRow is one element of `strata group lag --json`.
type lagCLIRow struct {
	Group                  string   `json:"group"`
	Topic                  string   `json:"topic"`
	Partition              int32    `json:"partition"`
	Committed              *int64   `json:"committed"`
	End                    int64    `json:"end"`
	LogStart               int64    `json:"log_start"`
	Lag                    int64    `json:"lag"`
	LagSeconds             *float64 `json:"lag_seconds"`
	RetentionMarginSeconds *float64 `json:"retention_margin_seconds"`
	Lost                   bool     `json:"lost"`
}

func TestGroupLagCLI(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	retention := map[string]string{"retention.ms": fmt.Sprint(lagCLIRetentionMs)}
	createTopic(t, adm, lagCLITopic, 1, retention)
	createTopic(t, adm, lagCLILostTopic, 1, retention)
	createTopic(t, adm, lagCLICompactTopic, 1, map[string]string{"cleanup.policy": "compact"})
	for _, topic := range []string{lagCLITopic, lagCLILostTopic, lagCLICompactTopic} {
		lagCLIProduce(t, b, topic)
	}
	lagCLIConsume(t, b, lagCLIConsumed)
	lagCLIDeleteRecords(t, adm, lagCLILostTopic, lagCLILogStart)
	lagCLICommit(t, adm, lagCLILostGroup, lagCLILostTopic, 10)
	lagCLICommit(t, adm, lagCLICompactGroup, lagCLICompactTopic, 30)
	createTopic(t, adm, lagCLIWideTopic, 1, retention)
	lagCLIProduceWide(t, b)
	lagCLICommit(t, adm, lagCLIWideFirst, lagCLIWideTopic, 5)
	lagCLICommit(t, adm, lagCLIWideLast, lagCLIWideTopic, 95)

	lagCLICheckJSON(t, b)
	out := runStrata(t, "group", "lag", "--brokers", b.Addr)
	t.Logf("strata group lag:\n%s", out)
	for _, re := range []string{
		`(?m)^GROUP\s+TOPIC\s+PARTITION\s+COMMITTED\s+END\s+LAG\s+LAG-TIME\s+RETENTION$`,
		`(?m)^` + lagCLIGroup + `\s+` + lagCLITopic + `\s+0\s+40\s+100\s+60\s+\d+s\s+loses data in (59m\d+s|1h0m)$`,
		`(?m)^` + lagCLILostGroup + `\s+` + lagCLILostTopic + `\s+0\s+10\s+100\s+90\s+\d+s\s+LOST \(offset below log start 50\)$`,
		`(?m)^` + lagCLICompactGroup + `\s+` + lagCLICompactTopic + `\s+0\s+30\s+100\s+70\s+\d+s\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("strata group lag does not match %s:\n%s", re, out)
		}
	}
	if !strings.Contains(out, "loses data in") {
		t.Errorf("strata group lag lacks \"loses data in\":\n%s", out)
	}

	out = runStrata(t, "group", "describe", "--brokers", b.Addr, lagCLIGroup)
	t.Logf("strata group describe %s:\n%s", lagCLIGroup, out)
	if !regexp.MustCompile(`(?m)^\s+TOPIC\s+PARTITION\s+COMMITTED\s+END\s+LAG\s+MEMBER\s+CLIENT-ID\s+HOST\s+RETENTION$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+`+lagCLITopic+`\s+0\s+40\s+100\s+60\s+-\s+-\s+-\s+loses data in \S+$`).MatchString(out) {
		t.Errorf("strata group describe lacks the RETENTION column or its row:\n%s", out)
	}

	out = runStrata(t, "group", "list", "--brokers", b.Addr)
	t.Logf("strata group list:\n%s", out)
	for _, re := range []string{
		`(?m)^GROUP\s+TYPE\s+STATE\s+PROTOCOL-TYPE\s+COORDINATOR\s+RETENTION$`,
		`(?m)^` + lagCLIGroup + `\s.*\sloses data in \S+$`,
		`(?m)^` + lagCLILostGroup + `\s.*\sLOST$`,
		`(?m)^` + lagCLICompactGroup + `\s.*\s-$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("strata group list does not match %s:\n%s", re, out)
		}
	}
}

// lagCLICheckJSON: `group lag --json` of every group, each row checked
// against what the test set up.
func lagCLICheckJSON(t *testing.T, b *Broker) {
	t.Helper()
	out := runStrata(t, "group", "lag", "--json", "--brokers", b.Addr)
	t.Logf("strata group lag --json:\n%s", out)
	var rows []lagCLIRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("group lag --json: %v\n%s", err, out)
	}
	byGroup := map[string]lagCLIRow{}
	for _, r := range rows {
		if r.Partition != 0 {
			t.Errorf("row of partition %d of a one-partition topic: %+v", r.Partition, r)
		}
		byGroup[r.Group] = r
	}
	if len(rows) != 5 || len(byGroup) != 5 {
		t.Fatalf("%d rows, want one per group:\n%s", len(rows), out)
	}

	r := byGroup[lagCLIGroup]
	if r.Topic != lagCLITopic || r.Committed == nil || *r.Committed != lagCLIConsumed || r.End != lagCLIRecords ||
		r.LogStart != 0 || r.Lag != lagCLIRecords-lagCLIConsumed || r.Lost {
		t.Errorf("row of %s: %+v", lagCLIGroup, r)
	}
	if r.LagSeconds == nil || *r.LagSeconds < 0 || *r.LagSeconds > 300 {
		t.Errorf("lag_seconds of %s: %v, want between 0 and the test's age", lagCLIGroup, r.LagSeconds)
	}
	if m := r.RetentionMarginSeconds; m == nil || *m < 3000 || *m > 3600 {
		t.Errorf("retention_margin_seconds of %s: %v, want in [3000, 3600]", lagCLIGroup, m)
	}

	r = byGroup[lagCLILostGroup]
	if !r.Lost || r.LogStart != lagCLILogStart || r.RetentionMarginSeconds == nil || *r.RetentionMarginSeconds != 0 ||
		r.Lag != lagCLIRecords-10 {
		t.Errorf("row of %s: %+v, want lost below log start %d", lagCLILostGroup, r, lagCLILogStart)
	}
	r = byGroup[lagCLICompactGroup]
	if r.Lost || r.RetentionMarginSeconds != nil || r.Lag != lagCLIRecords-30 {
		t.Errorf("row of %s: %+v, want no retention margin (compact only)", lagCLICompactGroup, r)
	}
	for _, g := range []string{lagCLIWideFirst, lagCLIWideLast} {
		if r = byGroup[g]; r.LagSeconds == nil || r.RetentionMarginSeconds == nil {
			t.Errorf("row of %s: %+v, want the record at its committed offset read", g, r)
		}
	}
}

// lagCLIProduce writes lagCLIRecords keyed records (the compact topic
// wants keys) to partition 0 of topic.
func lagCLIProduce(t *testing.T, b *Broker, topic string) {
	t.Helper()
	cl := b.Client(kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range lagCLIRecords {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, cl, rs...)
}

// lagCLIProduceWide writes lagCLIRecords records of 64 KiB, random so
// that compression leaves them several fetches' worth.
func lagCLIProduceWide(t *testing.T, b *Broker) {
	t.Helper()
	cl := b.Client(kgo.DefaultProduceTopic(lagCLIWideTopic))
	var rs []*kgo.Record
	for range lagCLIRecords {
		v := make([]byte, 64<<10)
		rand.Read(v)
		rs = append(rs, &kgo.Record{Value: v})
	}
	produceSync(t, cl, rs...)
}

// lagCLIConsume has a classic group member read n records of
// lagCLITopic, commit them and leave.
func lagCLIConsume(t *testing.T, b *Broker, n int) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	cl := b.Client(kgo.ConsumerGroup(lagCLIGroup), kgo.ConsumeTopics(lagCLITopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	var read []*kgo.Record
	for len(read) < n {
		fs := cl.PollRecords(ctx, n-len(read))
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming: %v", err)
		}
		read = append(read, fs.Records()...)
	}
	if err := cl.CommitRecords(ctx, read...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cl.Close()
	offsets, err := b.Admin().FetchOffsets(ctx, lagCLIGroup)
	if o, ok := offsets.Lookup(lagCLITopic, 0); err != nil || !ok || o.At != int64(n) {
		t.Fatalf("committed offset of %s: %+v %v, want %d", lagCLIGroup, o, err, n)
	}
}

func lagCLICommit(t *testing.T, adm *kadm.Client, group, topic string, at int64) {
	t.Helper()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	resps, err := adm.CommitOffsets(testCtx(t, 30*time.Second), group, offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("commit %s at %d: %v", group, at, err)
	}
}

func lagCLIDeleteRecords(t *testing.T, adm *kadm.Client, topic string, to int64) {
	t.Helper()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: to})
	resps, err := adm.DeleteRecords(testCtx(t, 30*time.Second), offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %s below %d: %v", topic, to, err)
	}
}
