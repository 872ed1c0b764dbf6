package consumer

import (
	"errors"
	"reflect"
	"testing"
)

func TestJoinRecords(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 2, 2: 1})
	if recs := g.TakeRecords(); len(recs) != 0 {
		t.Fatalf("SetTopics on an empty group wrote %v", recs)
	}
	req := joinReq("a", "t1")
	req.ClientID, req.ClientHost = "cli", "/10.0.0.1"
	mustBeat(t, g, req, 0)
	want := []Record{
		ConsumerGroupMemberMetadataValue{MemberID: "a", ClientID: "cli", ClientHost: "/10.0.0.1",
			SubscribedTopicNames: []string{"t1"}, RebalanceTimeoutMs: testRebalanceTimeoutMs},
		ConsumerGroupMetadataValue{Epoch: 1},
		ConsumerGroupPartitionMetadataValue{Topics: []TopicMetadata{{ID: tid(1), Name: "t1", Partitions: 2}}},
		ConsumerGroupTargetAssignmentMemberValue{MemberID: "a", TopicPartitions: asg(1, 0, 1).List()},
		ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: 1},
		ConsumerGroupCurrentMemberAssignmentValue{MemberID: "a", MemberEpoch: 1, State: int8(StateStable),
			AssignedPartitions: asg(1, 0, 1).List(), PartitionsPendingRevocation: []TopicPartitions{}},
	}
	if got := g.TakeRecords(); !reflect.DeepEqual(got, want) {
		t.Fatalf("records\n got %#v\nwant %#v", got, want)
	}
	hb := beat("a", 1, nil)
	hb.ClientID, hb.ClientHost = "cli", "/10.0.0.1"
	mustBeat(t, g, hb, 10)
	if recs := g.TakeRecords(); len(recs) != 0 {
		t.Fatalf("a heartbeat that changed nothing wrote %v", recs)
	}
	mustBeat(t, g, beat("a", LeaveEpoch, nil), 20)
	recs := g.TakeRecords()
	if len(recs) < 3 || !reflect.DeepEqual(recs[0], ConsumerGroupCurrentMemberAssignmentValue{MemberID: "a", Tombstone: true}) ||
		!reflect.DeepEqual(recs[2], ConsumerGroupMemberMetadataValue{MemberID: "a", Tombstone: true}) {
		t.Fatalf("leave records %v", recs)
	}
}

// Replay re-arms deadlines from the replay time: sessions in full, and the
// rebalance timeout of a member caught revoking.
func TestReplayRearmsDeadlines(t *testing.T) {
	g := newTestGroup(t, Config{SessionTimeoutMs: 3000}, map[byte]int32{1: 4})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	mustBeat(t, g, beat("a", 1, nil), 0)
	records := g.TakeRecords()
	r, err := Replay("g", g.cfg, records, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if dumpGroup(r) != dumpGroup(g) {
		t.Fatalf("replay differs:\n%s\n%s", dumpGroup(r), dumpGroup(g))
	}
	if removed := r.Tick(10000 + testRebalanceTimeoutMs - 1); len(removed) != 0 {
		t.Fatalf("removed %v before any deadline", removed)
	}
	if removed := r.Tick(10000 + testRebalanceTimeoutMs); !reflect.DeepEqual(removed, []string{"a"}) {
		t.Fatalf("revoking member: removed %v", removed)
	}
	if removed := r.Tick(13000); !reflect.DeepEqual(removed, []string{"b"}) {
		t.Fatalf("session: removed %v", removed)
	}
	// After a restart the coordinator sets the topics again: no bump if
	// nothing subscribed changed, even with more topics known.
	epoch := r.Epoch()
	r.SetTopics(topicsMeta(map[byte]int32{1: 4, 9: 1}))
	if r.Epoch() != epoch {
		t.Fatalf("SetTopics after replay bumped %d → %d", epoch, r.Epoch())
	}
}

func TestReplayRejectsDoubleOwners(t *testing.T) {
	state := func(id string) Record {
		return ConsumerGroupCurrentMemberAssignmentValue{MemberID: id, MemberEpoch: 1, AssignedPartitions: asg(1, 0).List()}
	}
	records := []Record{
		ConsumerGroupMemberMetadataValue{MemberID: "a"}, state("a"),
		ConsumerGroupMemberMetadataValue{MemberID: "b"}, state("b"),
	}
	if _, err := Replay("g", Config{}, records, 0); !errors.Is(err, ErrDoubleOwner) {
		t.Fatalf("got %v", err)
	}
}

func TestStaticLeaveReleasesPendingRevocation(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4})
	join := joinReq("a1", "t1")
	join.InstanceID = strPtr("inst")
	mustBeat(t, g, join, 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	kept := *mustBeat(t, g, beat("a1", 1, nil), 0).Assignment // revoking the other two
	mustBeat(t, g, beat("a1", StaticLeaveEpoch, nil), 10)
	d := g.Describe()
	if a := d.Members[0]; a.MemberEpoch != StaticLeaveEpoch || !a.Assignment.Equal(kept) || a.PendingRevocation.Len() != 0 {
		t.Fatalf("static member away: %+v", a)
	}
	r := mustBeat(t, g, beat("b", 2, nil), 20)
	wantAssignment(t, r, asg(1, 0, 1, 2, 3).Minus(kept))
	if r.MemberEpoch != 2 {
		t.Fatalf("b: %+v", r)
	}
}

func TestDescribe(t *testing.T) {
	g := newTestGroup(t, Config{Assignors: []Assignor{Range{}}}, map[byte]int32{1: 2})
	if d := g.Describe(); d.State != GroupEmpty || d.Assignor != RangeName || len(d.Members) != 0 {
		t.Fatalf("empty: %+v", d)
	}
	req := joinReq("a", "t1")
	req.RackID, req.SubscribedTopicRegex, req.ClientID, req.ClientHost = strPtr("r1"), strPtr("t.*"), "c", "h"
	mustBeat(t, g, req, 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	d := g.Describe()
	a := d.Members[0]
	if d.State != GroupReconciling || d.Epoch != 2 || a.RackID != "r1" || a.SubscribedTopicRegex != "t.*" ||
		a.ClientID != "c" || a.ClientHost != "h" || !a.TargetAssignment.Equal(asg(1, 0)) || !a.Assignment.Equal(asg(1, 0, 1)) {
		t.Fatalf("reconciling: %s %+v", dumpDescription(d), a)
	}
	mustBeat(t, g, beat("a", 1, Assignment{}), 10)
	mustBeat(t, g, beat("b", 2, nil), 10)
	if d := g.Describe(); d.State != GroupStable {
		t.Fatalf("stable: %s", dumpDescription(d))
	}
}

func strPtr(s string) *string { return &s }
