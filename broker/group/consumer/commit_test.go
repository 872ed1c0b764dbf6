package consumer

import (
	"errors"
	"testing"
)

func commitOf(partitions ...int32) []CommitPartition {
	out := make([]CommitPartition, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, CommitPartition{Topic: "t1", Partition: p})
	}
	return out
}

// TestCheckCommitAssignmentEpochs: a commit at the member's epoch is
// accepted; at an older epoch only for partitions the member has owned
// since then (KIP-1251); never above its epoch, for a partition that moved
// to another member, or for an unknown member; after a reload, older
// epochs are refused until the member moves on.
func TestCheckCommitAssignmentEpochs(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4})
	a := mustBeat(t, g, joinReq("a", "t1"), 0)
	if err := g.CheckCommit("a", a.MemberEpoch, commitOf(0, 1, 2, 3)); err != nil {
		t.Fatalf("commit at the member's epoch: %v", err)
	}
	mustBeat(t, g, joinReq("b", "t1"), 10)
	revoking := mustBeat(t, g, beat("a", a.MemberEpoch, nil), 20)
	kept := *revoking.Assignment
	acked := mustBeat(t, g, beat("a", a.MemberEpoch, kept), 30)
	if acked.MemberEpoch <= a.MemberEpoch {
		t.Fatalf("a did not move on after acknowledging its revocation: %+v", acked)
	}
	var keptPs, gonePs []int32
	for p := range int32(4) {
		if kept.Contains(tid(1), p) {
			keptPs = append(keptPs, p)
		} else {
			gonePs = append(gonePs, p)
		}
	}
	b := mustBeat(t, g, beat("b", g.Describe().Members[1].MemberEpoch, Assignment{}), 40)
	for _, tc := range []struct {
		name   string
		member string
		epoch  int32
		ps     []CommitPartition
		want   error
	}{
		{"a at its old epoch, kept partitions", "a", a.MemberEpoch, commitOf(keptPs...), nil},
		{"a at its old epoch, a moved partition", "a", a.MemberEpoch, commitOf(append(keptPs, gonePs[0])...), ErrStaleMemberEpoch},
		{"a at its current epoch", "a", acked.MemberEpoch, commitOf(keptPs...), nil},
		{"a above its epoch", "a", acked.MemberEpoch + 1, commitOf(keptPs...), ErrStaleMemberEpoch},
		{"b before it got its partitions", "b", a.MemberEpoch, commitOf(gonePs...), ErrStaleMemberEpoch},
		{"b at its epoch", "b", b.MemberEpoch, commitOf(gonePs...), nil},
		{"an unknown topic at an old epoch", "a", a.MemberEpoch, []CommitPartition{{Topic: "nope"}}, ErrStaleMemberEpoch},
		{"unknown member", "c", 1, commitOf(keptPs...), ErrUnknownMemberID},
	} {
		if err := g.CheckCommit(tc.member, tc.epoch, tc.ps); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	reloaded, err := Replay("g", g.cfg, g.TakeRecords(), 50) // every record since NewGroup
	if err != nil {
		t.Fatal(err)
	}
	if err := reloaded.CheckCommit("a", a.MemberEpoch, commitOf(keptPs...)); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("after a reload an older epoch must be refused (assignment epochs are not persisted): %v", err)
	}
	if err := reloaded.CheckCommit("a", acked.MemberEpoch, commitOf(keptPs...)); err != nil {
		t.Fatalf("after a reload, the current epoch: %v", err)
	}
}
