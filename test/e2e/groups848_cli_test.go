package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// The strata group command on consumer-protocol (KIP-848) groups (issue
// 11): list shows their type, describe their epochs and assignments, and
// reset works once the group is empty and is refused while it has members.

// groups848Args: short consumer-protocol timeouts so members join, settle
// and leave within seconds.
var groups848Args = withArgs("--group-consumer-heartbeat-interval", "500ms", "--group-consumer-session-timeout", "10s",
	"--group-initial-rebalance-delay", "300ms", "--offsets-topic-num-partitions", "8")

const (
	cli848Topic      = "cli848"
	cli848Group      = "cli848-group"
	cli848Classic    = "cli848-classic" // a classic group beside it
	cli848Partitions = 4
	cli848PerPart    = 10 // records per partition
)

// consumer848 is a franz-go member of a consumer-protocol group that reads
// and auto-commits until closed.
type consumer848 struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	offsets map[int32][]int64 // partition -> offsets read, in order
}

func startConsumer848(t *testing.T, b *Broker, clientID string) *consumer848 {
	t.Helper()
	c := &consumer848{offsets: map[int32][]int64{}, done: make(chan struct{})}
	c.cl = b.Client(kgo.ConsumerGroup(cli848Group), kgo.ConsumeTopics(cli848Topic), kgo.ClientID(clientID),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(200*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := c.cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { c.offsets[r.Partition] = append(c.offsets[r.Partition], r.Offset) })
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.stop)
	return c
}

// stop ends polling and closes the client, which leaves the group (a
// heartbeat with member epoch -1) after committing what it read.
func (c *consumer848) stop() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

func (c *consumer848) read() map[int32][]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int32][]int64{}
	for p, os := range c.offsets {
		out[p] = slices.Clone(os)
	}
	return out
}

// TestGroups848CLI: two KIP-848 consumers read and commit a 4-partition
// topic, beside a classic group; `strata group list` shows the group as a
// consumer group, `describe` its epochs and each member's assignment (and
// the classic group as before); `reset` is refused
// while members are active and, once they left, moves the offsets to the
// start, where a new member resumes.
func TestGroups848CLI(t *testing.T) {
	b := StartBroker(t, groups848Args)
	adm := b.Admin()
	createTopic(t, adm, cli848Topic, cli848Partitions, nil)
	produce848(t, b)
	consumers := []*consumer848{startConsumer848(t, b, "cli848-a"), startConsumer848(t, b, "cli848-b")}
	described := waitStableAndCommitted(t, adm)
	startClassic848(t, b)

	checkList848(t, b)
	checkDescribe848(t, b, described)
	out := runStrataFailing(t, "group", "reset", "--brokers", b.Addr, cli848Group, "--to-earliest", "--execute")
	for _, want := range []string{"group " + cli848Group, "active members", "state Stable"} {
		if !strings.Contains(out, want) {
			t.Errorf("refused reset's message lacks %q:\n%s", want, out)
		}
	}
	t.Logf("refused reset: %s", out)
	checkOffsets848(t, adm, cli848PerPart) // the refusal moved nothing

	for _, c := range consumers {
		c.stop()
	}
	ctx := testCtx(t, 30*time.Second)
	testkit.WaitFor(t, 15*time.Second, "the group to become Empty", func() bool {
		l, err := adm.ListGroups(ctx)
		return err == nil && l[cli848Group].State == "Empty"
	})
	out = runStrata(t, "group", "describe", "--brokers", b.Addr, cli848Group)
	if !strings.Contains(out, "state Empty") || !strings.Contains(out, "consumer protocol: group epoch") ||
		strings.Contains(out, "cli848-a") {
		t.Errorf("describe of the empty consumer group:\n%s", out)
	}
	out = runStrata(t, "group", "reset", "--brokers", b.Addr, cli848Group, "--to-earliest", "--execute")
	if !strings.Contains(out, fmt.Sprintf("reset %d partitions of group %s", cli848Partitions, cli848Group)) {
		t.Errorf("reset output:\n%s", out)
	}
	checkOffsets848(t, adm, 0)
	checkResumesAtStart(t, b)
}

// startClassic848 runs a classic-protocol member of another group that
// reads and commits every record and stays in the group until cleanup.
func startClassic848(t *testing.T, b *Broker) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	cl := b.Client(kgo.ConsumerGroup(cli848Classic), kgo.ConsumeTopics(cli848Topic), kgo.ClientID("cli848-classic"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.SessionTimeout(groupSession))
	for read := 0; read < cli848Partitions*cli848PerPart; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("classic consumer: %v", err)
		}
		read += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("classic commit: %v", err)
	}
}

func produce848(t *testing.T, b *Broker) {
	t.Helper()
	cl := b.Client(kgo.DefaultProduceTopic(cli848Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := 0; i < cli848Partitions*cli848PerPart; i++ {
		rs = append(rs, &kgo.Record{Partition: int32(i % cli848Partitions), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, cl, rs...)
}

// waitStableAndCommitted waits (judged by kadm, not by the command under
// test) until both members reconciled two partitions each and every
// partition's offset is committed at its end, and returns that view.
func waitStableAndCommitted(t *testing.T, adm *kadm.Client) kadm.DescribedConsumerGroup {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	var d kadm.DescribedConsumerGroup
	testkit.WaitFor(t, 20*time.Second, "a stable group of two members with two partitions each", func() bool {
		all, err := adm.DescribeConsumerGroups(ctx, cli848Group)
		if d = all[cli848Group]; err != nil || d.Err != nil || d.State != "Stable" || len(d.Members) != 2 {
			return false
		}
		for _, m := range d.Members {
			if m.MemberEpoch != d.Epoch || len(m.Assignment[cli848Topic]) != 2 || len(m.TargetAssignment[cli848Topic]) != 2 {
				return false
			}
		}
		return true
	})
	testkit.WaitFor(t, 20*time.Second, "every partition committed at its end", func() bool {
		offsets, err := adm.FetchOffsets(ctx, cli848Group)
		if err != nil {
			return false
		}
		for p := int32(0); p < cli848Partitions; p++ {
			if o, ok := offsets.Lookup(cli848Topic, p); !ok || o.At != cli848PerPart {
				return false
			}
		}
		return true
	})
	return d
}

// checkList848: the group is listed as a consumer-type group, and the
// --type filter keeps or drops it.
func checkList848(t *testing.T, b *Broker) {
	t.Helper()
	out := runStrata(t, "group", "list", "--brokers", b.Addr)
	if !regexp.MustCompile(`(?m)^GROUP\s+TYPE\s+STATE\s+PROTOCOL-TYPE\s+COORDINATOR\s+RETENTION$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+cli848Group+`\s+consumer\s+Stable\s+consumer\s+1\s+loses data in \S+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+cli848Classic+`\s+classic\s+Stable\s+consumer\s+1\s+loses data in \S+$`).MatchString(out) {
		t.Errorf("strata group list:\n%s", out)
	}
	t.Logf("strata group list:\n%s", out)
	if out := runStrata(t, "group", "list", "--brokers", b.Addr, "--type", "consumer"); !strings.Contains(out, cli848Group) ||
		strings.Contains(out, cli848Classic) {
		t.Errorf("group list --type consumer:\n%s", out)
	}
	if out := runStrata(t, "group", "list", "--brokers", b.Addr, "--type", "classic"); strings.Contains(out, cli848Group+" ") ||
		!strings.Contains(out, cli848Classic) {
		t.Errorf("group list --type classic:\n%s", out)
	}
}

// checkDescribe848: the lag table (all committed, no lag) and the KIP-848
// view agree with kadm's ConsumerGroupDescribe; the classic group described
// in the same command has no KIP-848 view.
func checkDescribe848(t *testing.T, b *Broker, d kadm.DescribedConsumerGroup) {
	t.Helper()
	both := runStrata(t, "group", "describe", "--brokers", b.Addr, cli848Group, cli848Classic)
	out, classic, ok := strings.Cut(both, "group "+cli848Classic+" ")
	if !ok || !strings.Contains(classic, "state Stable") || !strings.Contains(classic, "cli848-classic") ||
		strings.Contains(classic, "consumer protocol") {
		t.Errorf("describe of the classic group:\n%s", both)
	}
	header := fmt.Sprintf("consumer protocol: group epoch %d  assignment epoch %d  assignor %s", d.Epoch, d.AssignmentEpoch, d.AssignorName)
	for _, want := range []string{"state Stable", "protocol consumer/" + d.AssignorName, "members 2", header,
		"MEMBER  ", "EPOCH", "ASSIGNED", "TARGET"} {
		if !strings.Contains(out, want) {
			t.Errorf("strata group describe lacks %q:\n%s", want, out)
		}
	}
	for p := 0; p < cli848Partitions; p++ { // topic partition committed end lag member
		lag := regexp.MustCompile(fmt.Sprintf(`(?m)^\s+%s\s+%d\s+%d\s+%d\s+0\s+\S+`, cli848Topic, p, cli848PerPart, cli848PerPart))
		if !lag.MatchString(out) {
			t.Errorf("lag row of partition %d missing or wrong:\n%s", p, out)
		}
	}
	for _, m := range d.Members {
		var ps []string
		for _, p := range slices.Sorted(maps.Keys(m.Assignment[cli848Topic])) {
			ps = append(ps, fmt.Sprint(p))
		}
		assigned := cli848Topic + ":" + strings.Join(ps, ",")
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^\s+%s\s+-\s+%s\s+\S+\s+%d\s+%s\s+%s$`,
			regexp.QuoteMeta(m.MemberID), regexp.QuoteMeta(m.ClientID), m.MemberEpoch, assigned, assigned))
		if !row.MatchString(out) {
			t.Errorf("no row for member %s (client %s, epoch %d, assigned %s):\n%s", m.MemberID, m.ClientID, m.MemberEpoch, assigned, out)
		}
	}
	t.Logf("strata group describe %s %s:\n%s", cli848Group, cli848Classic, both)
}

func checkOffsets848(t *testing.T, adm *kadm.Client, want int64) {
	t.Helper()
	offsets, err := adm.FetchOffsets(testCtx(t, 30*time.Second), cli848Group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < cli848Partitions; p++ {
		if o, ok := offsets.Lookup(cli848Topic, p); !ok || o.At != want {
			t.Errorf("partition %d committed at %+v (found %v), want %d", p, o, ok, want)
		}
	}
}

// checkResumesAtStart: a new member of the reset group reads every
// partition again from offset 0.
func checkResumesAtStart(t *testing.T, b *Broker) {
	t.Helper()
	c := startConsumer848(t, b, "cli848-c")
	testkit.WaitFor(t, 20*time.Second, "the new member to read every record again", func() bool {
		read := c.read()
		for p := int32(0); p < cli848Partitions; p++ {
			if len(read[p]) < cli848PerPart {
				return false
			}
		}
		return true
	})
	for p, offsets := range c.read() {
		if offsets[0] != 0 {
			t.Errorf("partition %d resumed at %d, want 0 after the reset", p, offsets[0])
		}
	}
}

// runStrataFailing runs a strata client command that must fail with exit
// status 1 and returns its stderr.
func runStrataFailing(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("strata %s: want exit status 1, got %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return stderr.String()
}
