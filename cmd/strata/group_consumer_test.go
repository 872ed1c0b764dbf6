package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func assignmentOf(tps ...kmsg.AssignmentTopicPartition) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = tps
	return a
}

func topicPartitions(id byte, name string, ps ...int32) kmsg.AssignmentTopicPartition {
	tp := kmsg.NewAssignmentTopicPartition()
	tp.TopicID, tp.Topic, tp.Partitions = [16]byte{id}, name, ps
	return tp
}

// TestPrintConsumerProtocol: epochs, assignor and one row per member sorted
// by id; topic names from the response, else resolved by id through one
// metadata lookup, else the id.
func TestPrintConsumerProtocol(t *testing.T) {
	g := kmsg.NewConsumerGroupDescribeResponseGroup()
	g.Group, g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = "g", "Reconciling", 7, 6, "uniform"
	static := "inst-1"
	b := kmsg.NewConsumerGroupDescribeResponseGroupMember()
	b.MemberID, b.InstanceID, b.ClientID, b.ClientHost, b.MemberEpoch = "member-b", &static, "client-b", "/10.0.0.2", 6
	b.Assignment = assignmentOf(topicPartitions(1, "orders", 3, 1))
	b.TargetAssignment = assignmentOf(topicPartitions(2, "", 0), topicPartitions(1, "orders", 1))
	a := kmsg.NewConsumerGroupDescribeResponseGroupMember()
	a.MemberID, a.ClientID, a.ClientHost, a.MemberEpoch = "member-a", "client-a", "/10.0.0.1", 7
	a.TargetAssignment = assignmentOf(topicPartitions(9, "", 2), topicPartitions(1, "orders", 3))
	g.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{b, a}

	lookups := 0
	namer := &topicNamer{lookup: func() (map[[16]byte]string, error) {
		lookups++
		return map[[16]byte]string{{2}: "audit"}, nil
	}}
	var out bytes.Buffer
	if err := printConsumerProtocol(&out, g, namer); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	want := [][]string{
		{"consumer protocol:", "group epoch 7", "assignment epoch 6", "assignor uniform"},
		{"MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNED", "TARGET"},
		{"member-a", " - ", "client-a", "/10.0.0.1", " 7 ", " - ", "id:CQAAAAAAAAAAAAAAAAAAAA:2 orders:3"},
		{"member-b", "inst-1", "client-b", "/10.0.0.2", " 6 ", "orders:1,3", "audit:0 orders:1"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(lines[i], p) {
				t.Errorf("line %d %q lacks %q", i, lines[i], p)
			}
		}
	}
	if lookups != 1 {
		t.Errorf("metadata looked up %d times, want once", lookups)
	}
}

func TestPrintConsumerProtocolLookupFailure(t *testing.T) {
	g := kmsg.NewConsumerGroupDescribeResponseGroup()
	m := kmsg.NewConsumerGroupDescribeResponseGroupMember()
	m.Assignment = assignmentOf(topicPartitions(4, "", 0))
	g.Members = append(g.Members, m)
	boom := errors.New("metadata down")
	namer := &topicNamer{lookup: func() (map[[16]byte]string, error) { return nil, boom }}
	if err := printConsumerProtocol(&bytes.Buffer{}, g, namer); !errors.Is(err, boom) {
		t.Fatalf("want the lookup's error, got %v", err)
	}
}
