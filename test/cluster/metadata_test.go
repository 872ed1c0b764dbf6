package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/internal/testkit"
)

// view is one partition as a client shows it; sets are sorted.
type view struct {
	Leader   int32
	Replicas []int32
	ISR      []int32
}

func (v view) String() string {
	return fmt.Sprintf("leader %d replicas %v isr %v", v.Leader, v.Replicas, v.ISR)
}

func (v view) equal(o view) bool {
	return v.Leader == o.Leader && slices.Equal(v.Replicas, o.Replicas) && slices.Equal(v.ISR, o.ISR)
}

// clusterView is what one tool reports: live brokers and partitions.
type clusterView struct {
	Brokers    []int32
	Partitions map[int32]view
}

var (
	kcatBroker    = regexp.MustCompile(`(?m)^\s*broker (\d+) at (\S+)`)
	kcatPartition = regexp.MustCompile(`(?m)^\s*partition (\d+), leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)`)
)

// kcatView runs kcat -L against the up brokers and parses its answer.
func kcatView(kcat string, c *Cluster, topic string) (clusterView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-L", "-b", strings.Join(c.Addrs(c.Up()...), ","), "-t", topic, "-m", "5")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return clusterView{}, fmt.Errorf("kcat -L: %v: %s", err, errOut.String())
	}
	v := clusterView{Partitions: map[int32]view{}}
	for _, m := range kcatBroker.FindAllStringSubmatch(out.String(), -1) {
		v.Brokers = append(v.Brokers, atoi32(m[1]))
	}
	slices.Sort(v.Brokers)
	for _, m := range kcatPartition.FindAllStringSubmatch(out.String(), -1) {
		v.Partitions[atoi32(m[1])] = view{Leader: atoi32(m[2]), Replicas: idList(m[3]), ISR: idList(m[4])}
	}
	if len(v.Partitions) == 0 {
		return v, fmt.Errorf("kcat -L listed no partition:\n%s", out.String())
	}
	return v, nil
}

// kadmView asks the cluster through kadm.
func kadmView(adm *kadm.Client, topic string) (clusterView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return clusterView{}, err
	}
	v := clusterView{Partitions: map[int32]view{}}
	for _, b := range md.Brokers {
		v.Brokers = append(v.Brokers, b.NodeID)
	}
	slices.Sort(v.Brokers)
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return v, fmt.Errorf("kadm metadata of %s: %v", topic, td.Err)
	}
	for p, pd := range td.Partitions {
		v.Partitions[p] = view{Leader: pd.Leader, Replicas: sorted(pd.Replicas), ISR: sorted(pd.ISR)}
	}
	return v, nil
}

func atoi32(s string) int32 {
	n, _ := strconv.ParseInt(s, 10, 32)
	return int32(n)
}

func idList(s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			out = append(out, atoi32(f))
		}
	}
	slices.Sort(out)
	return out
}

// waitViews waits until kcat -L and kadm both report live brokers and, for
// every partition, replicas {1,2,3}, ISR isr and a leader in the ISR other
// than notLeader, and agree with each other. It returns the agreed view.
func waitViews(t *testing.T, c *Cluster, kcat, topic string, partitions int32, live, isr []int32, notLeader int32) clusterView {
	t.Helper()
	adm := c.Admin()
	var agreed clusterView
	c.WaitFor(fmt.Sprintf("kcat and kadm to show brokers %v and ISR %v", live, isr), isrTimeout, func() (bool, string) {
		kv, err := kcatView(kcat, c, topic)
		if err != nil {
			return false, err.Error()
		}
		av, err := kadmView(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		if why := checkView("kcat", kv, partitions, live, isr, notLeader); why != "" {
			return false, why
		}
		if why := checkView("kadm", av, partitions, live, isr, notLeader); why != "" {
			return false, why
		}
		for p := int32(0); p < partitions; p++ {
			if !kv.Partitions[p].equal(av.Partitions[p]) {
				return false, fmt.Sprintf("partition %d: kcat %v, kadm %v", p, kv.Partitions[p], av.Partitions[p])
			}
		}
		agreed = av
		return true, ""
	})
	return agreed
}

func checkView(tool string, v clusterView, partitions int32, live, isr []int32, notLeader int32) string {
	if !slices.Equal(v.Brokers, live) {
		return fmt.Sprintf("%s: brokers %v, want %v", tool, v.Brokers, live)
	}
	if len(v.Partitions) != int(partitions) {
		return fmt.Sprintf("%s: %d partitions, want %d", tool, len(v.Partitions), partitions)
	}
	for p, pv := range v.Partitions {
		switch {
		case !slices.Equal(pv.Replicas, []int32{1, 2, 3}):
			return fmt.Sprintf("%s: partition %d replicas %v, want [1 2 3]", tool, p, pv.Replicas)
		case !slices.Equal(pv.ISR, isr):
			return fmt.Sprintf("%s: partition %d: %v, want ISR %v", tool, p, pv, isr)
		case !slices.Contains(pv.ISR, pv.Leader) || pv.Leader == notLeader:
			return fmt.Sprintf("%s: partition %d: %v, want a leader in the ISR other than %d", tool, p, pv, notLeader)
		}
	}
	return ""
}

// TestMetadataFollowsChanges: kcat -L and kadm show
// the same leaders, replicas and ISR as they change: all in sync, a broker
// killed (gone from the broker list and every ISR, no longer leading, listed
// offline), and back (ISR healed).
func TestMetadataFollowsChanges(t *testing.T) {
	defer timed(t, "TestMetadataFollowsChanges")()
	kcat := testkit.NeedBinary(t, "kcat")
	c := Start(t, Config{})
	const topic = "meta"
	replicatedTopic(t, c, topic, 3, nil)
	all := []int32{1, 2, 3}
	v := waitViews(t, c, kcat, topic, 3, all, all, -1)
	leaders := map[int32]bool{}
	for _, pv := range v.Partitions {
		leaders[pv.Leader] = true
	}
	if len(leaders) != 3 {
		t.Errorf("leaders of the 3 partitions are not spread over the 3 brokers: %v", v.Partitions)
	}

	victim := v.Partitions[0].Leader
	c.Kill(victim)
	rest := slices.DeleteFunc(slices.Clone(all), func(id int32) bool { return id == victim })
	waitViews(t, c, kcat, topic, 3, rest, rest, victim)
	for p := int32(0); p < 3; p++ {
		m := mustPartition(t, c, topic, p)
		if !slices.Equal(m.Offline, []int32{victim}) {
			t.Errorf("partition %d: offline replicas %v, want [%d] (%v)", p, m.Offline, victim, m)
		}
	}

	c.Restart(victim)
	waitViews(t, c, kcat, topic, 3, all, all, -1)
	for p := int32(0); p < 3; p++ {
		if m := mustPartition(t, c, topic, p); len(m.Offline) != 0 {
			t.Errorf("partition %d: offline replicas %v after the restart", p, m.Offline)
		}
	}
}

// TestAddedBrokerJoins: a broker started later with an empty disk shows up
// in Metadata and, as a replica of a topic created afterwards with RF 4,
// gets in sync and takes acks=all writes with the others.
func TestAddedBrokerJoins(t *testing.T) {
	defer timed(t, "TestAddedBrokerJoins")()
	c := Start(t, Config{Spare: 1})
	added := c.AddBroker()
	c.WaitFor(fmt.Sprintf("broker %d in Metadata", added.ID), electionTimeout, func() (bool, string) {
		resp, err := c.Metadata(context.Background(), 1)
		if err != nil {
			return false, err.Error()
		}
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
		}
		return slices.Contains(ids, added.ID), fmt.Sprint("brokers ", ids)
	})
	const topic = "four"
	c.CreateTopic(topic, 2, 4, map[string]string{"min.insync.replicas": "4"})
	for p := int32(0); p < 2; p++ {
		waitISR(t, c, topic, p, []int32{1, 2, 3, 4})
	}
	produceNumbered(t, c, topic, 0, 0, 10)
	produceNumbered(t, c, topic, 1, 0, 10)
	for p := int32(0); p < 2; p++ {
		waitISR(t, c, topic, p, []int32{1, 2, 3, 4})
	}
}
