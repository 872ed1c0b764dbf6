package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/coordinator/coordtest"
)

func TestStatesNamed(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []State
	}{
		{names: nil, want: nil},
		{names: []string{"stable"}, want: []State{StateStable}},
		{names: []string{"Empty", "DEAD"}, want: []State{StateEmpty, StateDead}},
		{names: []string{"Reconciling"}, want: nil}, // a consumer-protocol state only
	} {
		if got := statesNamed(tc.names); !slices.Equal(got, tc.want) {
			t.Errorf("statesNamed(%v) = %v, want %v", tc.names, got, tc.want)
		}
	}
}

func TestListStateNamesOfNoStateListsNothing(t *testing.T) {
	c := consumerCoordinator(t, coordtest.NewMemLog(), &topicSet{}, 10_000)
	if got, code := c.ListStateNames([]string{"Reconciling"}); code != 0 || got != nil {
		t.Fatalf("ListStateNames = %v, %d; want nothing", got, code)
	}
}

func TestDescribeAsClassic(t *testing.T) {
	topics := &topicSet{}
	topics.add(1, "t", 2)
	c := consumerCoordinator(t, coordtest.NewMemLog(), topics, 10_000)
	resp := hb(t, c, join("m1", "t"))
	d, code := c.DescribeAsClassic("cg")
	if code != 0 || d.ProtocolType != "consumer" || len(d.Members) != 1 {
		t.Fatalf("DescribeAsClassic = %+v, %d", d, code)
	}
	m := d.Members[0]
	if m.MemberID != resp.MemberID || m.ClientID != "c" {
		t.Fatalf("member = %+v", m)
	}
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(m.Metadata); err != nil || !slices.Equal(md.Topics, []string{"t"}) {
		t.Fatalf("metadata = %+v, %v", md, err)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(m.Assignment); err != nil {
		t.Fatalf("assignment: %v", err)
	}
	for _, at := range a.Topics {
		if at.Topic != "t" {
			t.Fatalf("assignment names topic %q, want t", at.Topic)
		}
	}

	// A group of neither protocol is described by the classic machine.
	d, code = c.DescribeAsClassic("other")
	if code != 0 || d.ProtocolType != "" || d.State != "Dead" {
		t.Fatalf("unknown group = %+v, %d", d, code)
	}
}
