package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/strata-log/strata/metadata"
)

// A move of [1 2 3] to [4 2 3] walks begin → catch-up → complete, the
// leader moving last; a cancel restores the original replicas.
func TestReassignLifecycle(t *testing.T) {
	live := []metadata.BrokerInfo{broker(1, 100), broker(2, 200), broker(3, 300), broker(4, 400)}
	st := state(1, 5, 100, ids(1, 2, 3), ids(1, 2, 3))

	begun, err := Reassign(st, ids(4, 2, 3), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(begun.Replicas, ids(4, 2, 3, 1)) || !slices.Equal(begun.AddingReplicas, ids(4)) ||
		!slices.Equal(begun.RemovingReplicas, ids(1)) || begun.Leader != 1 || begun.LeaderEpoch != 5 || begun.ReassignStartMs != 1000 {
		t.Fatalf("begun: %+v", begun)
	}
	if got := Plan(View{Brokers: live, Topics: oneTopic(nil, begun)}); len(got) != 0 {
		t.Fatalf("planned %v while replica 4 is not in the ISR", got)
	}

	caughtUp := begun
	caughtUp.ISR = ids(1, 2, 3, 4)
	changes := Plan(View{Brokers: live, Topics: oneTopic(nil, caughtUp)})
	if len(changes) != 1 || !changes[0].ChangesAssignment() {
		t.Fatalf("plan once 4 is in the ISR: %v", changes)
	}
	done := changes[0].New
	if !slices.Equal(done.Replicas, ids(4, 2, 3)) || !slices.Equal(done.ISR, ids(2, 3, 4)) || done.Reassigning() || done.ReassignStartMs != 0 ||
		done.Leader != 4 || done.LeaderEpoch != 6 || done.LeaderBrokerEpoch != 400 {
		t.Fatalf("completed: %+v (want replicas [4 2 3], ISR [2 3 4], leader 4 at epoch 6)", done)
	}
	want := "t/0 v7: leader 1→4 epoch 5→6 (broker epoch 100→400) isr [1 2 3 4]→[2 3 4] replicas [4 2 3 1]→[4 2 3]: reassignment done: replicas [4 2 3 1]→[4 2 3]"
	if got := changes[0].String(); got != want {
		t.Fatalf("change:\n got %s\nwant %s", got, want)
	}
	done.Version = 8
	if again := Plan(View{Brokers: live, Topics: oneTopic(nil, done)}); len(again) != 0 {
		t.Fatalf("not idempotent: %v", again)
	}

	cancelled, err := Reassign(begun, nil, 2000)
	if err != nil {
		t.Fatal(err)
	}
	// The original set comes back; its order is the move's (Kafka's revert
	// keeps the current order too), and the leader stays.
	if !slices.Equal(cancelled.Replicas, ids(2, 3, 1)) || cancelled.Reassigning() || cancelled.Leader != 1 || cancelled.LeaderEpoch != 5 ||
		cancelled.ReassignStartMs != 0 {
		t.Fatalf("cancelled: %+v", cancelled)
	}
	if _, err := Reassign(st, nil, 2000); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel with none running: %v", err)
	}
}

// Leadership passes only to a serving target replica; a leader among
// replicas being added that a new target drops leaves the partition
// leaderless for Plan to elect.
func TestReassignEdges(t *testing.T) {
	live := []metadata.BrokerInfo{broker(1, 100), broker(2, 200), broker(3, 300), draining(broker(4, 400))}
	st := state(1, 5, 100, ids(4, 1), ids(1, 4))
	st.AddingReplicas, st.RemovingReplicas = ids(4), ids(1)
	if got := Plan(View{Brokers: live, Topics: oneTopic(nil, st)}); len(got) != 1 || got[0].ChangesAssignment() {
		t.Fatalf("onto a draining broker: %v, want only the ISR shrink", got)
	}

	ledByAdded := state(4, 5, 400, ids(4, 1), ids(1, 4))
	ledByAdded.AddingReplicas, ledByAdded.RemovingReplicas = ids(4), ids(1)
	next, err := Reassign(ledByAdded, ids(2, 1), 3000)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(next.Replicas, ids(2, 1)) || !slices.Equal(next.AddingReplicas, ids(2)) || next.RemovingReplicas != nil ||
		next.Leader != -1 || next.LeaderEpoch != 6 || !slices.Equal(next.ISR, ids(1)) {
		t.Fatalf("new target dropping the leader: %+v", next)
	}

	for _, bad := range [][]int32{{}, {1, 1}, {-2}} {
		if _, err := Reassign(state(1, 0, 100, ids(1), ids(1)), bad, 0); !errors.Is(err, ErrInvalidReassignment) {
			t.Errorf("target %v: %v", bad, err)
		}
	}
	// Pure shrink: [1 2 3] → [1 2] completes at once.
	shrink, _ := Reassign(state(1, 5, 100, ids(1, 2, 3), ids(1, 2, 3)), ids(1, 2), 0)
	live = []metadata.BrokerInfo{broker(1, 100), broker(2, 200), broker(3, 300)}
	if got := Plan(View{Brokers: live, Topics: oneTopic(nil, shrink)}); len(got) != 1 || !slices.Equal(got[0].New.Replicas, ids(1, 2)) {
		t.Fatalf("shrink: %v", got)
	}
}
