package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// `strata group reset`, `delete`, `delete-offsets` and the --json of
// `list` and `describe` against a real broker, judged by kadm: reset plans
// without changing anything unless --execute, each target lands on exactly
// the offsets Kafka's tool would choose, a partition selection leaves the
// other partitions alone, and the coordinator's refusals (active members,
// subscribed topics) come back as clear messages.

const (
	cliResetTopic   = "cligroup-reset"
	cliResetGroup   = "cligroup-reset-g"
	cliResetPerPart = 100 // records per partition
	cliResetOld     = 50  // the first cliResetOld records of each partition are 3h old, the rest 10m
	cliResetStart2  = 10  // partition 2's log start (DeleteRecords)

	cliDelTopic      = "cligroup-del"
	cliDelOtherTopic = "cligroup-del-other"
	cliDelLive       = "cligroup-del-live" // a group with an active classic member
	cliDelIdle       = "cligroup-del-idle" // a group with only committed offsets

	cliJSONTopic     = "cligroup-json"
	cliJSONGroup     = "cligroup-json-g"
	cliJSONRetention = 3_600_000 // retention.ms of the JSON topic
)

// TestCLIGroupReset: three partitions of 100 records (the first 50 three
// hours old, the rest ten minutes), partition 2 starting at offset 10, a
// group committed at 60, 70, 80. Each reset is planned first and checked
// to change nothing, then executed and checked to the offset.
func TestCLIGroupReset(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, cliResetTopic, 3, nil)
	cliResetProduce(t, b)
	cliDeleteRecords(t, adm, cliResetTopic, 2, cliResetStart2)
	cliCommit(t, adm, cliResetGroup, cliResetTopic, map[int32]int64{0: 60, 1: 70, 2: 80})
	reset := func(args ...string) string {
		return runStrata(t, append([]string{"group", "reset", "--brokers", b.Addr, cliResetGroup}, args...)...)
	}
	checkOffsets := func(step string, want map[int32]int64) {
		t.Helper()
		cliCheckOffsets(t, adm, cliResetGroup, cliResetTopic, step, want)
	}

	out := reset("--to-offset", "5", "--topic", cliResetTopic)
	t.Logf("plan:\n%s", out)
	for _, re := range []string{
		`(?m)^GROUP\s+TOPIC\s+PARTITION\s+CURRENT-OFFSET\s+NEW-OFFSET\s+LOG-START\s+END$`,
		`(?m)^` + cliResetGroup + `\s+` + cliResetTopic + `\s+0\s+60\s+5\s+0\s+100$`,
		`(?m)^` + cliResetGroup + `\s+` + cliResetTopic + `\s+1\s+70\s+5\s+0\s+100$`,
		`(?m)^` + cliResetGroup + `\s+` + cliResetTopic + `\s+2\s+80\s+10\s+10\s+100$`, // clamped to the log start
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("plan does not match %s:\n%s", re, out)
		}
	}
	checkOffsets("after the plan", map[int32]int64{0: 60, 1: 70, 2: 80})
	reset("--to-earliest", "--dry-run")
	checkOffsets("after --dry-run", map[int32]int64{0: 60, 1: 70, 2: 80})
	cliResetCheckPlanJSON(t, reset("--to-offset", "1000", "--json"))
	checkOffsets("after the JSON plan", map[int32]int64{0: 60, 1: 70, 2: 80})

	out = reset("--to-offset", "5", "--topic", cliResetTopic+":0,1", "--execute")
	if !strings.Contains(out, "reset 2 partitions of group "+cliResetGroup) {
		t.Errorf("--execute output:\n%s", out)
	}
	checkOffsets("--to-offset 5 of partitions 0,1", map[int32]int64{0: 5, 1: 5, 2: 80})
	reset("--shift-by", "30", "--all-topics", "--execute")
	checkOffsets("--shift-by 30", map[int32]int64{0: 35, 1: 35, 2: 100}) // 110 clamped to the end
	reset("--shift-by", "-1000", "--topic", cliResetTopic+":2", "--execute")
	checkOffsets("--shift-by -1000 of partition 2", map[int32]int64{0: 35, 1: 35, 2: cliResetStart2})
	reset("--by-duration", "1h", "--topic", cliResetTopic+":1", "--execute")
	checkOffsets("--by-duration 1h of partition 1", map[int32]int64{0: 35, 1: cliResetOld, 2: cliResetStart2})
	reset("--to-datetime", time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339), "--topic", cliResetTopic+":0", "--execute")
	checkOffsets("--to-datetime 2h ago of partition 0", map[int32]int64{0: cliResetOld, 1: cliResetOld, 2: cliResetStart2})
	reset("--to-latest", "--execute")
	checkOffsets("--to-latest", map[int32]int64{0: 100, 1: 100, 2: 100})
	reset("--to-earliest", "--execute")
	checkOffsets("--to-earliest", map[int32]int64{0: 0, 1: 0, 2: cliResetStart2})

	msg := runStrataFailing(t, "group", "reset", "--brokers", b.Addr, cliResetGroup, "--shift-by", "1", "--topic", cliResetTopic+":7")
	if !strings.Contains(msg, "has no partition 7") {
		t.Errorf("reset of a partition that does not exist: %s", msg)
	}
}

// cliResetCheckPlanJSON: --to-offset 1000 plans the end of every
// partition, with the committed offsets as they are.
func cliResetCheckPlanJSON(t *testing.T, out string) {
	t.Helper()
	var rows []struct {
		Group         string `json:"group"`
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		CurrentOffset *int64 `json:"current_offset"`
		NewOffset     int64  `json:"new_offset"`
		LogStart      int64  `json:"log_start"`
		End           int64  `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("reset --json: %v, %d rows\n%s", err, len(rows), out)
	}
	current := []int64{60, 70, 80}
	for i, r := range rows {
		if r.Group != cliResetGroup || r.Topic != cliResetTopic || r.Partition != int32(i) || r.CurrentOffset == nil ||
			*r.CurrentOffset != current[i] || r.NewOffset != cliResetPerPart || r.End != cliResetPerPart {
			t.Errorf("reset --json row %d: %+v", i, r)
		}
	}
	if rows[2].LogStart != cliResetStart2 {
		t.Errorf("log start of partition 2: %d, want %d", rows[2].LogStart, cliResetStart2)
	}
}

// cliResetProduce writes cliResetPerPart records to each of the three
// partitions, the first cliResetOld stamped three hours ago, the rest ten
// minutes ago: offsets at now−1h and now−2h are cliResetOld.
func cliResetProduce(t *testing.T, b *Broker) {
	t.Helper()
	cl := b.Client(kgo.DefaultProduceTopic(cliResetTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	old, recent := time.Now().Add(-3*time.Hour), time.Now().Add(-10*time.Minute)
	var rs []*kgo.Record
	for p := range int32(3) {
		for i := range cliResetPerPart {
			stamp := recent
			if i < cliResetOld {
				stamp = old
			}
			rs = append(rs, &kgo.Record{Partition: p, Timestamp: stamp, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	produceSync(t, cl, rs...)
}

// TestCLIGroupDelete: a group with an active member cannot be reset,
// deleted, or have the offsets of its subscribed topic deleted, and each
// refusal says why; an idle group's offsets are deleted partition by
// partition and then the group itself.
func TestCLIGroupDelete(t *testing.T) {
	b := StartBroker(t, withArgs("--group-initial-rebalance-delay", "300ms"))
	adm := b.Admin()
	createTopic(t, adm, cliDelTopic, 2, nil)
	createTopic(t, adm, cliDelOtherTopic, 1, nil)
	cliStartLiveMember(t, b, adm)
	cliCommit(t, adm, cliDelIdle, cliDelTopic, map[int32]int64{0: 3, 1: 4})
	cliCommit(t, adm, cliDelIdle, cliDelOtherTopic, map[int32]int64{0: 5})
	liveBefore := cliFetchOffsets(t, adm, cliDelLive, cliDelTopic)

	msg := runStrataFailing(t, "group", "reset", "--brokers", b.Addr, cliDelLive, "--to-earliest", "--execute")
	if !strings.Contains(msg, "group "+cliDelLive+" has 1 active members (state Stable): stop its consumers first") {
		t.Errorf("reset --execute of a live group: %s", msg)
	}
	if out := runStrata(t, "group", "reset", "--brokers", b.Addr, cliDelLive, "--to-earliest"); !strings.Contains(out, "NEW-OFFSET") {
		t.Errorf("a plan of a live group is still printed:\n%s", out)
	}
	msg = runStrataFailing(t, "group", "delete", "--brokers", b.Addr, cliDelLive)
	t.Logf("delete of the live group: %s", msg)
	for _, want := range []string{"group " + cliDelLive + " not deleted: it has active members", "NON_EMPTY_GROUP"} {
		if !strings.Contains(msg, want) {
			t.Errorf("delete of a live group lacks %q: %s", want, msg)
		}
	}
	msg = runStrataFailing(t, "group", "delete-offsets", "--brokers", b.Addr, cliDelLive, "--topic", cliDelTopic)
	t.Logf("delete-offsets of the subscribed topic: %s", msg)
	for _, want := range []string{"2 of 2 partitions of group " + cliDelLive + " kept their offsets",
		"subscribe to topic " + cliDelTopic, "GROUP_SUBSCRIBED_TO_TOPIC"} {
		if !strings.Contains(msg, want) {
			t.Errorf("delete-offsets of a subscribed topic lacks %q: %s", want, msg)
		}
	}
	cliCheckOffsets(t, adm, cliDelLive, cliDelTopic, "after the refusals", liveBefore)
	cliCheckDescribeLiveJSON(t, b)

	out := runStrata(t, "group", "delete-offsets", "--brokers", b.Addr, cliDelIdle, "--topic", cliDelTopic+":1", "--topic", cliDelOtherTopic)
	for _, re := range []string{
		`(?m)^` + cliDelIdle + `\s+` + cliDelTopic + `\s+1\s+deleted$`,
		`(?m)^` + cliDelIdle + `\s+` + cliDelOtherTopic + `\s+0\s+deleted$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("delete-offsets output does not match %s:\n%s", re, out)
		}
	}
	cliCheckOffsets(t, adm, cliDelIdle, cliDelTopic, "after delete-offsets", map[int32]int64{0: 3})
	cliCheckOffsets(t, adm, cliDelIdle, cliDelOtherTopic, "after delete-offsets", map[int32]int64{})

	if out := runStrata(t, "group", "delete", "--brokers", b.Addr, cliDelIdle); out != "deleted group "+cliDelIdle+"\n" {
		t.Errorf("delete of the idle group: %q", out)
	}
	ctx := testCtx(t, 30*time.Second)
	if l, err := adm.ListGroups(ctx); err != nil || l[cliDelIdle].Group != "" || l[cliDelLive].Group != cliDelLive {
		t.Errorf("groups after the delete: %v %+v", err, l)
	}
	msg = runStrataFailing(t, "group", "delete", "--brokers", b.Addr, "cligroup-nosuch")
	if !strings.Contains(msg, "group cligroup-nosuch does not exist") {
		t.Errorf("delete of an unknown group: %s", msg)
	}
}

// cliStartLiveMember has a classic member of cliDelLive read both
// partitions of cliDelTopic (two records and one), commit them, and stay until cleanup; it returns
// once the group is Stable with the commits in.
func cliStartLiveMember(t *testing.T, b *Broker, adm *kadm.Client) {
	t.Helper()
	produceSync(t, b.Client(kgo.DefaultProduceTopic(cliDelTopic), kgo.RecordPartitioner(kgo.ManualPartitioner())),
		&kgo.Record{Partition: 0, Value: []byte("a")}, &kgo.Record{Partition: 0, Value: []byte("b")},
		&kgo.Record{Partition: 1, Value: []byte("c")})
	ctx := testCtx(t, 30*time.Second)
	cl := b.Client(kgo.ConsumerGroup(cliDelLive), kgo.ConsumeTopics(cliDelTopic), kgo.ClientID("cligroup-live"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.SessionTimeout(groupSession))
	for read := 0; read < 3; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("live member: %v", err)
		}
		read += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("live member's commit: %v", err)
	}
	testkit.WaitFor(t, 15*time.Second, "the live group to be Stable", func() bool {
		d, err := adm.DescribeGroups(ctx, cliDelLive)
		return err == nil && d[cliDelLive].State == "Stable" && len(d[cliDelLive].Members) == 1
	})
}

// cliCheckDescribeLiveJSON: describe --json of the live group names its
// one member and assigns every partition to it.
func cliCheckDescribeLiveJSON(t *testing.T, b *Broker) {
	t.Helper()
	out := runStrata(t, "group", "describe", "--json", "--brokers", b.Addr, cliDelLive)
	var groups []cliDescribedGroup
	if err := json.Unmarshal([]byte(out), &groups); err != nil || len(groups) != 1 {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	g := groups[0]
	if g.Group != cliDelLive || g.State != "Stable" || g.ProtocolType != "consumer" || len(g.Members) != 1 ||
		g.Members[0].ClientID != "cligroup-live" || len(g.Partitions) != 2 {
		t.Fatalf("describe --json of the live group:\n%s", out)
	}
	for _, p := range g.Partitions {
		if p.MemberID == nil || *p.MemberID != g.Members[0].MemberID || p.Committed == nil || *p.Committed != p.End || p.Lag != 0 {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
	}
}

// cliDescribedGroup is one element of `group describe --json`.
type cliDescribedGroup struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
	Members      []struct {
		MemberID string `json:"member_id"`
		ClientID string `json:"client_id"`
	} `json:"members"`
	Partitions []struct {
		Topic                  string   `json:"topic"`
		Partition              int32    `json:"partition"`
		Committed              *int64   `json:"committed"`
		End                    int64    `json:"end"`
		LogStart               int64    `json:"log_start"`
		Lag                    int64    `json:"lag"`
		RetentionMarginSeconds *float64 `json:"retention_margin_seconds"`
		MemberID               *string  `json:"member_id"`
	} `json:"partitions"`
	ConsumerProtocol *json.RawMessage `json:"consumer_protocol"`
}

// TestCLIGroupJSON: list --json and describe --json of a group committed
// at 4 of 10 and 10 of 10 on a topic with a one-hour retention.ms.
func TestCLIGroupJSON(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	createTopic(t, adm, cliJSONTopic, 2, map[string]string{"retention.ms": fmt.Sprint(cliJSONRetention)})
	cl := b.Client(kgo.DefaultProduceTopic(cliJSONTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, cl, rs...)
	cliCommit(t, adm, cliJSONGroup, cliJSONTopic, map[int32]int64{0: 4, 1: 10})

	out := runStrata(t, "group", "list", "--json", "--brokers", b.Addr)
	t.Logf("group list --json:\n%s", out)
	var listed []struct {
		Group                  string   `json:"group"`
		State                  string   `json:"state"`
		Coordinator            *int32   `json:"coordinator"`
		RetentionMarginSeconds *float64 `json:"retention_margin_seconds"`
		Lost                   bool     `json:"lost"`
		Retention              string   `json:"retention"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 {
		t.Fatalf("group list --json: %v\n%s", err, out)
	}
	l := listed[0]
	if l.Group != cliJSONGroup || l.State != "Empty" || l.Coordinator == nil || l.Lost ||
		l.RetentionMarginSeconds == nil || *l.RetentionMarginSeconds < 3000 || *l.RetentionMarginSeconds > 3600 ||
		!strings.HasPrefix(l.Retention, "loses data in") {
		t.Errorf("group list --json: %+v", l)
	}

	out = runStrata(t, "group", "describe", "--json", "--brokers", b.Addr, cliJSONGroup)
	t.Logf("group describe --json:\n%s", out)
	var described []cliDescribedGroup
	if err := json.Unmarshal([]byte(out), &described); err != nil || len(described) != 1 {
		t.Fatalf("group describe --json: %v\n%s", err, out)
	}
	d := described[0]
	if d.Group != cliJSONGroup || d.State != "Empty" || d.Members == nil || len(d.Members) != 0 ||
		len(d.Partitions) != 2 || d.ConsumerProtocol != nil {
		t.Fatalf("group describe --json:\n%s", out)
	}
	for i, want := range []struct{ committed, lag int64 }{{4, 6}, {10, 0}} {
		p := d.Partitions[i]
		if p.Topic != cliJSONTopic || p.Partition != int32(i) || p.Committed == nil || *p.Committed != want.committed ||
			p.End != 10 || p.LogStart != 0 || p.Lag != want.lag || p.MemberID != nil {
			t.Errorf("partition %d: %+v, want committed %d lag %d", i, p, want.committed, want.lag)
		}
	}
	if m := d.Partitions[0].RetentionMarginSeconds; m == nil || *m < 3000 || *m > 3600 {
		t.Errorf("retention margin of partition 0: %v", m)
	}
	msg := runStrataFailing(t, "group", "describe", "--json", "--brokers", b.Addr, "cligroup-nosuch")
	if !strings.Contains(msg, "group cligroup-nosuch does not exist") {
		t.Errorf("describe --json of an unknown group: %s", msg)
	}
}

func cliCommit(t *testing.T, adm *kadm.Client, group, topic string, at map[int32]int64) {
	t.Helper()
	offsets := kadm.Offsets{}
	for p, o := range at {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resps, err := adm.CommitOffsets(testCtx(t, 30*time.Second), group, offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

// cliFetchOffsets is group's committed offsets of topic by partition.
func cliFetchOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	offsets, err := adm.FetchOffsets(testCtx(t, 30*time.Second), group)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range offsets[topic] {
		if o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

// cliCheckOffsets fails t unless group's committed offsets of topic are
// exactly want (a partition missing from want has none).
func cliCheckOffsets(t *testing.T, adm *kadm.Client, group, topic, step string, want map[int32]int64) {
	t.Helper()
	if got := cliFetchOffsets(t, adm, group, topic); !maps.Equal(got, want) {
		t.Errorf("%s: committed offsets of %s on %s are %v, want %v", step, group, topic, got, want)
	}
}

func cliDeleteRecords(t *testing.T, adm *kadm.Client, topic string, partition int32, to int64) {
	t.Helper()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: partition, At: to})
	resps, err := adm.DeleteRecords(testCtx(t, 30*time.Second), offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %s/%d below %d: %v", topic, partition, to, err)
	}
}
