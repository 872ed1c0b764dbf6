package metadata

import "testing"

func TestRegistrarLeadsOnlyStatesOfItsLiveRegistration(t *testing.T) {
	r := NewRegistrar(nil, 1, 10)
	lost := make(chan struct{})
	led := PartitionState{Leader: 1, LeaderBrokerEpoch: 7}
	if r.Leads(led) {
		t.Fatal("leads before registering")
	}
	r.set(Registration{Epoch: 7, Lost: lost})
	for _, tc := range []struct {
		st   PartitionState
		want bool
	}{
		{led, true},
		{PartitionState{Leader: 2, LeaderBrokerEpoch: 7}, false}, // another leader
		{PartitionState{Leader: 1, LeaderBrokerEpoch: 6}, false}, // a stale registration
		{PartitionState{Leader: 1}, false},                       // initial state: nobody leads
	} {
		if got := r.Leads(tc.st); got != tc.want {
			t.Errorf("Leads(%+v) = %v, want %v", tc.st, got, tc.want)
		}
	}
	close(lost)
	if r.Leads(led) {
		t.Fatal("leads after the registration was lost")
	}
}
