package consumer

import (
	"fmt"
	"testing"
)

// tid is topic id n (bytes 0..14 zero), so ids sort by n.
func tid(n byte) TopicID { var t TopicID; t[15] = n; return t }

// asg builds an assignment: asg(1, 0, 1, 2, 3) is topic 1 partitions 0..3
// (topic then partitions; a new topic starts after a negative separator).
func asg(spec ...int) Assignment {
	var tps []TopicPartition
	topic, start := byte(0), true
	for _, v := range spec {
		switch {
		case v < 0:
			start = true
		case start:
			topic, start = byte(v), false
		default:
			tps = append(tps, TopicPartition{tid(topic), int32(v)})
		}
	}
	a := NewAssignment(tps...)
	if a == nil {
		return Assignment{}
	}
	return a
}

func topicsMeta(counts map[byte]int32) map[TopicID]TopicMetadata {
	out := map[TopicID]TopicMetadata{}
	for n, c := range counts {
		out[tid(n)] = TopicMetadata{ID: tid(n), Name: fmt.Sprintf("t%d", n), Partitions: c}
	}
	return out
}

// checkAssignment fails unless every partition of a subscribed topic is
// given to exactly one member subscribed to it, and only those partitions.
func checkAssignment(t *testing.T, members []MemberSpec, topics map[TopicID]TopicMetadata, got map[string]Assignment) {
	t.Helper()
	if len(got) != len(members) {
		t.Fatalf("result has %d members, want %d", len(got), len(members))
	}
	owner := map[TopicPartition]string{}
	for _, m := range members {
		a, ok := got[m.MemberID]
		if !ok {
			t.Fatalf("member %s missing from result", m.MemberID)
		}
		for _, tp := range a.Partitions() {
			if prev, dup := owner[tp]; dup {
				t.Fatalf("%v given to %s and %s", tp, prev, m.MemberID)
			}
			if !subscribes(m, tp.Topic) || tp.Partition >= topics[tp.Topic].Partitions {
				t.Fatalf("%v given to %s, not subscribed or not existing", tp, m.MemberID)
			}
			owner[tp] = m.MemberID
		}
	}
	for _, topic := range subscribedTopics(members, topics) {
		for p := range topics[topic].Partitions {
			if _, ok := owner[TopicPartition{topic, p}]; !ok {
				t.Fatalf("%s-%d not assigned", topic, p)
			}
		}
	}
}
