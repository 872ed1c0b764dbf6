package consumer

import (
	"errors"
	"testing"
)

func ownedSet(a Assignment) func(TopicID, int32) bool { return a.Contains }

func ptr(a Assignment) *Assignment { return &a }

func TestReconcile(t *testing.T) {
	none := Assignment{}
	cases := []struct {
		name   string
		cur    MemberState
		target Assignment
		epoch  int32
		others Assignment  // owned by other members
		client *Assignment // heartbeat's owned partitions
		want   MemberState
	}{
		{"new member gets free target", NewMember(), asg(1, 0, 1), 3, none, ptr(none),
			MemberState{StateStable, 3, 0, asg(1, 0, 1), none}},
		{"new member waits for unreleased", NewMember(), asg(1, 0, 1), 3, asg(1, 1), ptr(none),
			MemberState{StateUnreleasedPartitions, 3, 0, asg(1, 0), none}},
		{"stable at target unchanged", MemberState{StateStable, 3, 2, asg(1, 0), none}, asg(1, 0), 3, none, nil,
			MemberState{StateStable, 3, 2, asg(1, 0), none}},
		{"revoke first, keep intersection, epoch stays",
			MemberState{StateStable, 3, 2, asg(1, 0, 1, 2), none}, asg(1, 0, 3), 4, none, ptr(asg(1, 0, 1, 2)),
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1, 2)}},
		{"no owned partitions given: assume still owned",
			MemberState{StateStable, 3, 2, asg(1, 0, 1), none}, asg(1, 0), 4, none, nil,
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1)}},
		{"client already dropped the revoked: skip revocation",
			MemberState{StateStable, 3, 2, asg(1, 0, 1), none}, asg(1, 0, 2), 4, none, ptr(asg(1, 0)),
			MemberState{StateStable, 4, 3, asg(1, 0, 2), none}},
		{"unrevoked waits while client owns a pending partition",
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1, 2)}, asg(1, 0, 3), 4, none, ptr(asg(1, 0, 2)),
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1, 2)}},
		{"unrevoked waits when client says nothing",
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1)}, asg(1, 0), 4, none, nil,
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1)}},
		{"acknowledged revocation: advance and assign",
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1, 2)}, asg(1, 0, 3), 4, none, ptr(asg(1, 0)),
			MemberState{StateStable, 4, 3, asg(1, 0, 3), none}},
		{"acknowledged but new partition still held elsewhere",
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0), asg(1, 1)}, asg(1, 0, 3), 4, asg(1, 3), ptr(asg(1, 0)),
			MemberState{StateUnreleasedPartitions, 4, 3, asg(1, 0), none}},
		{"acknowledged, epoch advances one step towards a later target with more revocation",
			MemberState{StateUnrevokedPartitions, 3, 3, asg(1, 0, 5), asg(1, 1)}, asg(1, 0), 6, none, ptr(asg(1, 0, 5)),
			MemberState{StateUnrevokedPartitions, 4, 3, asg(1, 0), asg(1, 5)}},
		{"unreleased gets released partition without new epoch",
			MemberState{StateUnreleasedPartitions, 4, 3, asg(1, 0), none}, asg(1, 0, 3), 4, none, ptr(asg(1, 0)),
			MemberState{StateStable, 4, 4, asg(1, 0, 3), none}},
		{"unreleased still waiting",
			MemberState{StateUnreleasedPartitions, 4, 3, asg(1, 0), none}, asg(1, 0, 3), 4, asg(1, 3), ptr(asg(1, 0)),
			MemberState{StateUnreleasedPartitions, 4, 4, asg(1, 0), none}},
		{"unreleased with a new target that revokes",
			MemberState{StateUnreleasedPartitions, 4, 3, asg(1, 0, 1), none}, asg(1, 1, 3), 5, asg(1, 3), ptr(asg(1, 0, 1)),
			MemberState{StateUnrevokedPartitions, 4, 4, asg(1, 1), asg(1, 0)}},
		{"unknown state, client owns nothing: from scratch",
			MemberState{StateUnknown, 2, 1, asg(1, 0, 1), none}, asg(1, 1, 2), 3, none, ptr(none),
			MemberState{StateStable, 3, 2, asg(1, 1, 2), none}},
		{"target across topics",
			MemberState{StateStable, 1, 0, asg(1, 0, -1, 2, 0), none}, asg(2, 0, 1, -1, 3, 0), 2, none, ptr(asg(1, 0, -1, 2, 0)),
			MemberState{StateUnrevokedPartitions, 1, 1, asg(2, 0), asg(1, 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.cur.Assigned.Clone()
			got, err := Reconcile(c.cur, c.target, c.epoch, ownedSet(c.others), c.client)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != c.want.State || got.Epoch != c.want.Epoch || got.PreviousEpoch != c.want.PreviousEpoch ||
				!got.Assigned.Equal(c.want.Assigned) || !got.PendingRevocation.Equal(c.want.PendingRevocation) {
				t.Fatalf("got  %v e%d p%d %v pending %v\nwant %v e%d p%d %v pending %v",
					got.State, got.Epoch, got.PreviousEpoch, got.Assigned.List(), got.PendingRevocation.List(),
					c.want.State, c.want.Epoch, c.want.PreviousEpoch, c.want.Assigned.List(), c.want.PendingRevocation.List())
			}
			if !c.cur.Assigned.Equal(before) {
				t.Fatal("Reconcile modified its input")
			}
			if lost := c.cur.Assigned.Intersect(c.target).Minus(got.Assigned); lost.Len() > 0 {
				t.Fatalf("revoked %v that is in both current and target", lost.List())
			}
		})
	}
}

func TestReconcileUnknownStateFences(t *testing.T) {
	cur := MemberState{StateUnknown, 2, 1, asg(1, 0), Assignment{}}
	for _, owned := range []*Assignment{nil, ptr(asg(1, 0))} {
		got, err := Reconcile(cur, asg(1, 0), 3, ownedSet(nil), owned)
		if !errors.Is(err, ErrFencedMemberEpoch) || got.State != StateUnknown || got.Epoch != 2 {
			t.Fatalf("owned %v: got %v, %v; want the member fenced and unchanged", owned, got, err)
		}
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateStable: "STABLE", StateUnrevokedPartitions: "UNREVOKED_PARTITIONS",
		StateUnreleasedPartitions: "UNRELEASED_PARTITIONS", StateUnknown: "UNKNOWN", State(9): "State(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}

func TestOwners(t *testing.T) {
	a := MemberState{Assigned: asg(1, 0), PendingRevocation: asg(1, 1)}
	b := MemberState{Assigned: asg(1, 2)}
	o, err := NewOwners(map[string]MemberState{"a": a, "b": b})
	if err != nil {
		t.Fatal(err)
	}
	if !o.OwnedByOthers("b")(tid(1), 1) || o.OwnedByOthers("a")(tid(1), 1) || o.OwnedByOthers("b")(tid(1), 3) {
		t.Fatal("OwnedByOthers wrong")
	}
	next := MemberState{Assigned: asg(1, 0, 3)}
	o.Update("a", a, next)
	if o.OwnedByOthers("b")(tid(1), 1) || !o.OwnedByOthers("b")(tid(1), 3) {
		t.Fatal("Update did not move ownership")
	}
	o.Remove("b", b)
	if o.OwnedByOthers("a")(tid(1), 2) || len(o) != 2 {
		t.Fatalf("Remove left %v", o)
	}
	if _, err := NewOwners(map[string]MemberState{"a": a, "c": {Assigned: asg(1, 1)}}); err == nil {
		t.Fatal("double owner not reported")
	}
}
