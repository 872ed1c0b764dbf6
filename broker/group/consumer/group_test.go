package consumer

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

const testRebalanceTimeoutMs = 1000

func newTestGroup(t *testing.T, cfg Config, counts map[byte]int32) *Group {
	t.Helper()
	if cfg.SessionTimeoutMs == 0 {
		cfg.SessionTimeoutMs = 3000
	}
	if cfg.HeartbeatIntervalMs == 0 {
		cfg.HeartbeatIntervalMs = 500
	}
	g, err := NewGroup("g", cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.SetTopics(topicsMeta(counts))
	return g
}

func joinReq(id string, topics ...string) HeartbeatRequest {
	return HeartbeatRequest{MemberID: id, MemberEpoch: JoinEpoch, RebalanceTimeoutMs: testRebalanceTimeoutMs,
		SubscribedTopicNames: topics, Owned: []TopicPartitions{}}
}

// beat is a heartbeat at epoch; owned is reported unless nil.
func beat(id string, epoch int32, owned Assignment) HeartbeatRequest {
	r := HeartbeatRequest{MemberID: id, MemberEpoch: epoch, RebalanceTimeoutMs: -1}
	if owned != nil {
		r.Owned = owned.List()
	}
	return r
}

func mustBeat(t *testing.T, g *Group, req HeartbeatRequest, now int64) HeartbeatResponse {
	t.Helper()
	resp, err := g.Heartbeat(req, now)
	if err != nil {
		t.Fatalf("heartbeat %+v: %v", req, err)
	}
	return resp
}

func wantAssignment(t *testing.T, resp HeartbeatResponse, want Assignment) {
	t.Helper()
	if resp.Assignment == nil {
		t.Fatalf("%s: no assignment in response, want %v", resp.MemberID, want.List())
	}
	if !resp.Assignment.Equal(want) {
		t.Fatalf("%s: assignment %v, want %v", resp.MemberID, resp.Assignment.List(), want.List())
	}
}

func TestJoinThenIncrementalHandOver(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4})
	a := mustBeat(t, g, joinReq("a", "t1"), 0)
	if a.MemberEpoch != 1 || a.HeartbeatIntervalMs != 500 {
		t.Fatalf("join: %+v", a)
	}
	wantAssignment(t, a, asg(1, 0, 1, 2, 3))

	b := mustBeat(t, g, joinReq("b", "t1"), 10)
	if b.MemberEpoch != 2 || b.Assignment == nil || b.Assignment.Len() != 0 {
		t.Fatalf("b joins while a owns everything: %+v", b)
	}
	// a must revoke two partitions, keeping the other two; its epoch waits.
	a = mustBeat(t, g, beat("a", 1, nil), 20)
	kept := *a.Assignment
	if a.MemberEpoch != 1 || kept.Len() != 2 || !kept.SubsetOf(asg(1, 0, 1, 2, 3)) {
		t.Fatalf("a revoking: %+v %v", a, kept.List())
	}
	// Without the acknowledgement nothing moves and nothing is resent.
	if a = mustBeat(t, g, beat("a", 1, nil), 30); a.Assignment != nil || a.MemberEpoch != 1 {
		t.Fatalf("a unacknowledged: %+v", a)
	}
	if b = mustBeat(t, g, beat("b", 2, nil), 40); b.Assignment != nil {
		t.Fatalf("b got partitions still owned by a: %v", b.Assignment.List())
	}
	a = mustBeat(t, g, beat("a", 1, kept), 50)
	if a.MemberEpoch != 2 {
		t.Fatalf("a after acknowledging: %+v", a)
	}
	wantAssignment(t, a, kept)
	b = mustBeat(t, g, beat("b", 2, nil), 60)
	wantAssignment(t, b, asg(1, 0, 1, 2, 3).Minus(kept))
	if d := g.Describe(); d.State != GroupStable || d.Epoch != 2 {
		t.Fatalf("describe: %+v", d)
	}
}

func TestHeartbeatErrors(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		req  HeartbeatRequest
		err  error
		code int16
	}{
		{"empty member id", joinReq("", "t1"), ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"join without rebalance timeout", func() HeartbeatRequest { r := joinReq("x", "t1"); r.RebalanceTimeoutMs = -1; return r }(),
			ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"join without subscription", joinReq("x"), ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"join owning partitions", func() HeartbeatRequest { r := joinReq("x", "t1"); r.Owned = asg(1, 0).List(); return r }(),
			ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"negative partition", beat("a", 1, Assignment{tid(1): {-1}}), ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"unknown assignor", func() HeartbeatRequest { r := joinReq("x", "t1"); r.ServerAssignor = str("sticky"); return r }(),
			ErrUnsupportedAssignor, kerr.UnsupportedAssignor.Code},
		{"epoch below -2", beat("a", -3, nil), ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"unknown member", beat("nobody", 1, nil), ErrUnknownMemberID, kerr.UnknownMemberID.Code},
		{"unknown member leaves", beat("nobody", LeaveEpoch, nil), ErrUnknownMemberID, kerr.UnknownMemberID.Code},
		{"epoch from the future", beat("a", 7, nil), ErrFencedMemberEpoch, kerr.FencedMemberEpoch.Code},
		{"static leave of a dynamic member", beat("a", StaticLeaveEpoch, nil), ErrInvalidRequest, kerr.InvalidRequest.Code},
		{"group full", joinReq("c", "t1"), ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached.Code},
		{"instance held by an active member", func() HeartbeatRequest { r := joinReq("c", "t1"); r.InstanceID = str("i"); return r }(),
			ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newTestGroup(t, Config{MaxSize: 2}, map[byte]int32{1: 2})
			mustBeat(t, g, joinReq("a", "t1"), 0)
			static := joinReq("b", "t1")
			static.InstanceID = str("i")
			mustBeat(t, g, static, 0)
			g.TakeRecords()
			before := g.Describe()
			_, err := g.Heartbeat(c.req, 10)
			if !errors.Is(err, c.err) || ErrorCode(err) != c.code {
				t.Fatalf("got %v (code %d), want %v (code %d)", err, ErrorCode(err), c.err, c.code)
			}
			if recs := g.TakeRecords(); len(recs) != 0 {
				t.Fatalf("a failed heartbeat wrote %d records", len(recs))
			}
			if after := g.Describe(); dumpDescription(after) != dumpDescription(before) {
				t.Fatalf("a failed heartbeat changed the group:\n%s\n%s", dumpDescription(before), dumpDescription(after))
			}
		})
	}
}

func TestAssignmentSentOnlyWhenChangedOrAsked(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 2})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	if r := mustBeat(t, g, beat("a", 1, nil), 10); r.Assignment != nil {
		t.Fatalf("unchanged assignment resent: %v", r.Assignment.List())
	}
	// A full heartbeat (owned partitions sent) always gets it: the client
	// may have lost the response that carried it.
	wantAssignment(t, mustBeat(t, g, beat("a", 1, Assignment{}), 20), asg(1, 0, 1))
	g.SetTopics(topicsMeta(map[byte]int32{1: 3}))
	r := mustBeat(t, g, beat("a", 1, nil), 30)
	if r.MemberEpoch != 2 {
		t.Fatalf("epoch after growth: %d", r.MemberEpoch)
	}
	wantAssignment(t, r, asg(1, 0, 1, 2))
}

func TestPreviousEpochAcceptedAfterLostResponse(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 2})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	g.SetTopics(topicsMeta(map[byte]int32{1: 3})) // epoch 2
	mustBeat(t, g, beat("a", 1, nil), 10)         // response lost
	r := mustBeat(t, g, beat("a", 1, asg(1, 0, 1)), 20)
	if r.MemberEpoch != 2 {
		t.Fatalf("epoch %d", r.MemberEpoch)
	}
	wantAssignment(t, r, asg(1, 0, 1, 2))
	if _, err := g.Heartbeat(beat("a", 1, nil), 30); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("previous epoch without owned partitions: %v", err)
	}
}

func TestLeaveReleasesPartitions(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	a := mustBeat(t, g, beat("a", 1, asg(1, 0, 1, 2, 3)), 0)
	if a = mustBeat(t, g, beat("a", 1, *a.Assignment), 0); a.MemberEpoch != 2 {
		t.Fatalf("a: %+v", a)
	}
	if r := mustBeat(t, g, beat("b", 2, nil), 0); r.Assignment == nil || r.Assignment.Len() != 2 {
		t.Fatalf("b: %+v", r)
	}
	if r := mustBeat(t, g, beat("b", LeaveEpoch, nil), 20); r.MemberEpoch != LeaveEpoch {
		t.Fatalf("leave response %+v", r)
	}
	r := mustBeat(t, g, beat("a", 2, nil), 30)
	if r.MemberEpoch != 3 || g.Len() != 1 {
		t.Fatalf("after b left: %+v, %d members", r, g.Len())
	}
	wantAssignment(t, r, asg(1, 0, 1, 2, 3))
}

func TestStaticLeaveAndRejoin(t *testing.T) {
	str := func(s string) *string { return &s }
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4})
	join := joinReq("a1", "t1")
	join.InstanceID = str("inst")
	mustBeat(t, g, join, 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	r := mustBeat(t, g, beat("a1", 1, asg(1, 0, 1, 2, 3)), 0)
	mustBeat(t, g, beat("a1", 1, *r.Assignment), 0)
	kept := g.Describe().Members[0].Assignment
	if r := mustBeat(t, g, beat("a1", StaticLeaveEpoch, nil), 100); r.MemberEpoch != StaticLeaveEpoch {
		t.Fatalf("static leave: %+v", r)
	}
	epoch := g.Epoch()
	if _, err := g.Heartbeat(beat("a1", 2, nil), 110); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("heartbeat after a static leave: %v", err)
	}
	// The instance's partitions stay reserved: b does not get them.
	if r := mustBeat(t, g, beat("b", 2, nil), 200); r.Assignment != nil && r.Assignment.Intersect(kept).Len() > 0 {
		t.Fatalf("b was given the static member's partitions %v", r.Assignment.List())
	}
	rejoin := joinReq("a2", "t1")
	rejoin.InstanceID = str("inst")
	r = mustBeat(t, g, rejoin, 300)
	if r.MemberEpoch != 2 || g.Epoch() != epoch || g.Len() != 2 {
		t.Fatalf("rejoin: %+v, group epoch %d (was %d), %d members", r, g.Epoch(), epoch, g.Len())
	}
	wantAssignment(t, r, kept)
	if _, err := g.Heartbeat(beat("a1", 2, nil), 310); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("replaced member id: %v", err)
	}
	if _, err := g.Heartbeat(join, 320); !errors.Is(err, ErrUnreleasedInstanceID) {
		t.Fatalf("a third member with the instance id: %v", err)
	}
}

func TestTickRemovesExpiredAndStuckMembers(t *testing.T) {
	g := newTestGroup(t, Config{SessionTimeoutMs: 3000}, map[byte]int32{1: 4})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	mustBeat(t, g, beat("a", 1, nil), 500) // a now revokes, never acknowledges
	// Heartbeats without the acknowledgement do not extend the deadline.
	mustBeat(t, g, beat("a", 1, nil), 1000)
	if removed := g.Tick(1499); len(removed) != 0 {
		t.Fatalf("removed early: %v", removed)
	}
	if d, ok := g.NextDeadline(); !ok || d != 500+testRebalanceTimeoutMs {
		t.Fatalf("next deadline %d %v", d, ok)
	}
	if removed := g.Tick(1500); len(removed) != 1 || removed[0] != "a" {
		t.Fatalf("stuck member not fenced: %v", removed)
	}
	if _, err := g.Heartbeat(beat("a", 1, nil), 1600); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("fenced member heartbeats: %v", err)
	}
	r := mustBeat(t, g, beat("b", 2, nil), 1700)
	wantAssignment(t, r, asg(1, 0, 1, 2, 3))
	if removed := g.Tick(1700 + 2999); len(removed) != 0 {
		t.Fatalf("removed before the session expired: %v", removed)
	}
	if removed := g.Tick(1700 + 3000); len(removed) != 1 || g.Len() != 0 || g.Describe().State != GroupEmpty {
		t.Fatalf("expired member not removed: %v, %d members", removed, g.Len())
	}
}

func TestSetTopicsBumpsOnlyForSubscribedTopics(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 2, 2: 2})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	g.SetTopics(topicsMeta(map[byte]int32{1: 2, 2: 5, 3: 1}))
	if g.Epoch() != 1 {
		t.Fatalf("unsubscribed topics bumped the epoch to %d", g.Epoch())
	}
	g.SetTopics(topicsMeta(map[byte]int32{2: 5, 3: 1}))
	if g.Epoch() != 2 {
		t.Fatalf("deleting a subscribed topic: epoch %d", g.Epoch())
	}
	// Subscribing by name before the topic exists: it is picked up later.
	// The client reports owning nothing, so t1's revocation is immediate.
	r := mustBeat(t, g, HeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeoutMs: -1,
		SubscribedTopicNames: []string{"t1", "t4"}, Owned: []TopicPartitions{}}, 10)
	if r.MemberEpoch != 3 || r.Assignment == nil || r.Assignment.Len() != 0 {
		t.Fatalf("after resubscribing: %+v", r)
	}
	g.SetTopics(topicsMeta(map[byte]int32{2: 5, 3: 1, 4: 2}))
	r = mustBeat(t, g, beat("a", r.MemberEpoch, nil), 20)
	if r.MemberEpoch != 4 || g.Epoch() != 4 {
		t.Fatalf("epoch %d, group %d", r.MemberEpoch, g.Epoch())
	}
	wantAssignment(t, r, asg(4, 0, 1))
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{{SessionTimeoutMs: -1}, {HeartbeatIntervalMs: 60000}, {MaxSize: -1}} {
		if _, err := NewGroup("g", cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestPreferredServerAssignor: the group uses the assignor most members
// name (ties: the earlier configured), the default when none names one,
// and a name outside the configured list is UNSUPPORTED_ASSIGNOR. A
// member's new choice bumps the epoch, as a subscription change.
func TestPreferredServerAssignor(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4})
	mustBeat(t, g, joinReq("a", "t1"), 0)
	if got := g.Describe().Assignor; got != UniformName {
		t.Fatalf("no member names one: assignor %q, want the default uniform", got)
	}
	rangeName, uniformName := RangeName, UniformName
	b := joinReq("b", "t1")
	b.ServerAssignor = &rangeName
	mustBeat(t, g, b, 10)
	if got := g.Describe().Assignor; got != RangeName {
		t.Fatalf("one vote for range: assignor %q", got)
	}
	epoch := g.Epoch()
	switchA := beat("a", g.Describe().Members[0].MemberEpoch, nil)
	switchA.ServerAssignor = &uniformName
	mustBeat(t, g, switchA, 20)
	if got := g.Describe().Assignor; got != UniformName || g.Epoch() != epoch+1 {
		t.Fatalf("tie uniform/range: assignor %q epoch %d (was %d), want uniform and a bump", got, g.Epoch(), epoch)
	}
	sticky := "sticky"
	c := joinReq("c", "t1")
	c.ServerAssignor = &sticky
	if _, err := g.Heartbeat(c, 30); !errors.Is(err, ErrUnsupportedAssignor) || ErrorCode(err) != kerr.UnsupportedAssignor.Code {
		t.Fatalf("unknown assignor: %v", err)
	}
	only := newTestGroup(t, Config{Assignors: []Assignor{Range{}}}, map[byte]int32{1: 4})
	d := joinReq("d", "t1")
	d.ServerAssignor = &uniformName
	if _, err := only.Heartbeat(d, 0); !errors.Is(err, ErrUnsupportedAssignor) {
		t.Fatalf("uniform not configured: %v", err)
	}
	if _, err := NewGroup("g", Config{Assignors: []Assignor{Range{}, Range{}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("duplicate assignors: %v", err)
	}
}
