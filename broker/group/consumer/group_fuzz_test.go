package consumer

import (
	"fmt"
	"testing"
)

// FuzzHeartbeat feeds arbitrary requests (any member id, epoch, owned
// partitions, subscription, instance id) and ticks to a Group: it must
// never panic, never let two members own a partition, and its records
// must always replay to an equal group.
func FuzzHeartbeat(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 1, 1, 2, 0, 0, 0, 4, 1, 2, 0, 1, 7, 9})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 2, 5, 5, 5, 1, 1, 0, 0, 3, 0, 255, 254, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := NewGroup("g", Config{SessionTimeoutMs: 1000, HeartbeatIntervalMs: 100, MaxSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		g.SetTopics(topicsMeta(map[byte]int32{1: 3, 2: 2}))
		var records []Record
		now := int64(0)
		for len(data) >= 5 {
			op, id, epoch, bits, parts := data[0], data[1], data[2], data[3], data[4]
			data = data[5:]
			now += int64(op % 8 * 50)
			if op%16 == 15 {
				g.Tick(now)
			} else {
				_, _ = g.Heartbeat(fuzzRequest(id, epoch, bits, parts), now)
			}
			records = append(records, g.TakeRecords()...)
			states := map[string]MemberState{}
			for mid, m := range g.members {
				states[mid] = m.state
			}
			if _, err := NewOwners(states); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Replay("g", g.cfg, records, now)
		if err != nil {
			t.Fatal(err)
		}
		if dumpGroup(r) != dumpGroup(g) {
			t.Fatalf("replay differs:\n%s\n%s", dumpGroup(r), dumpGroup(g))
		}
	})
}

// fuzzRequest: member id and epoch from small ranges so that requests hit
// existing members; bits select the optional fields.
func fuzzRequest(id, epoch, bits, parts byte) HeartbeatRequest {
	req := HeartbeatRequest{MemberID: fmt.Sprintf("m%d", id%6), MemberEpoch: int32(epoch%9) - 3,
		RebalanceTimeoutMs: -1}
	if id%6 == 5 {
		req.MemberID = ""
	}
	if bits&1 != 0 {
		req.RebalanceTimeoutMs = int32(bits) * 10
	}
	if bits&2 != 0 {
		req.SubscribedTopicNames = []string{fmt.Sprintf("t%d", 1+bits>>6)}
	}
	if bits&4 != 0 {
		inst := fmt.Sprintf("i%d", id%3)
		req.InstanceID = &inst
	}
	if bits&8 != 0 {
		req.Owned = []TopicPartitions{}
		for p := range int32(4) {
			if parts&(1<<p) != 0 {
				req.Owned = append(req.Owned, TopicPartitions{Topic: tid(1 + parts>>7), Partitions: []int32{p - int32(parts>>6&1)}})
			}
		}
	}
	if bits&16 != 0 {
		name := []string{"uniform", "range", "cooperative-sticky"}[parts%3]
		req.ServerAssignor = &name
	}
	return req
}
