package consumer

import (
	"math/rand/v2"
	"testing"
)

// TestReconcileProperties checks the rules of doc.go on random states,
// targets, other owners and client reports (including partitions and
// epochs that make no sense, as a faulty client could send).
func TestReconcileProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 848))
	for range 20000 {
		cur := randomMemberState(rng)
		target, others := randomSet(rng), randomSet(rng).Minus(cur.Owned())
		targetEpoch := cur.Epoch + int32(rng.IntN(3)) - 1
		var owned *Assignment
		if rng.IntN(4) != 0 {
			owned = ptr(randomSet(rng))
		}
		next, err := Reconcile(cur, target, targetEpoch, others.Contains, owned)
		if err != nil {
			if cur.State != StateUnknown {
				t.Fatalf("error %v for state %v", err, cur.State)
			}
			continue
		}
		checkTransition(t, cur, next, target, targetEpoch, others)
	}
}

func checkTransition(t *testing.T, cur, next MemberState, target Assignment, targetEpoch int32, others Assignment) {
	t.Helper()
	fail := func(what string) {
		t.Fatalf("%s\ncur  %v e%d %v pending %v\ntarget e%d %v others %v\nnext %v e%d p%d %v pending %v", what,
			cur.State, cur.Epoch, cur.Assigned.List(), cur.PendingRevocation.List(), targetEpoch, target.List(),
			others.List(), next.State, next.Epoch, next.PreviousEpoch, next.Assigned.List(), next.PendingRevocation.List())
	}
	switch {
	case next.Assigned.Minus(cur.Owned()).Intersect(others).Len() > 0:
		fail("given a partition another member owns")
	case cur.State != StateUnknown && cur.Assigned.Intersect(target).Minus(next.Assigned).Len() > 0:
		fail("revoked a partition in current and target")
	case next.Assigned.Intersect(next.PendingRevocation).Len() > 0:
		fail("assigned and pending revocation overlap")
	case next.PendingRevocation.Len() > 0 && next.State != StateUnrevokedPartitions:
		fail("pending revocation outside UNREVOKED_PARTITIONS")
	case !next.PendingRevocation.SubsetOf(cur.Owned()):
		fail("pending revocation of a partition the member did not own")
	case next.Epoch != cur.Epoch && !next.Assigned.Minus(cur.Assigned).SubsetOf(target):
		fail("gained a partition outside the target")
	case next.State != StateUnrevokedPartitions && next.Epoch != cur.Epoch && next.Epoch != targetEpoch:
		fail("settled on an epoch other than the target's")
	case next.State == StateStable && next.Epoch == targetEpoch && !next.Assigned.Equal(target):
		fail("STABLE at the target epoch without holding the target")
	case next.State == StateUnreleasedPartitions && target.Minus(next.Assigned).Intersect(others).Len() == 0:
		fail("UNRELEASED_PARTITIONS though nothing of the target is held by others")
	}
}

func randomMemberState(rng *rand.Rand) MemberState {
	m := MemberState{
		State:    State(rng.IntN(4)),
		Epoch:    int32(rng.IntN(5)),
		Assigned: randomSet(rng),
	}
	m.PreviousEpoch = m.Epoch - int32(rng.IntN(2))
	if m.State == StateUnrevokedPartitions {
		m.PendingRevocation = randomSet(rng).Minus(m.Assigned)
	}
	return m
}

// randomSet: a few partitions of topics 1..3, partitions -1..5.
func randomSet(rng *rand.Rand) Assignment {
	var tps []TopicPartition
	for range rng.IntN(6) {
		tps = append(tps, TopicPartition{tid(byte(1 + rng.IntN(3))), int32(rng.IntN(7)) - 1})
	}
	return NewAssignment(tps...)
}
