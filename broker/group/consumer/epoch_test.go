package consumer

import (
	"errors"
	"testing"
)

func TestCheckEpoch(t *testing.T) {
	dynamic := &StoredMember{Epoch: 5, PreviousEpoch: 4, Assigned: asg(1, 0, 1)}
	static := &StoredMember{Epoch: 5, PreviousEpoch: 4, InstanceID: "i", Assigned: asg(1, 0)}
	cases := []struct {
		name   string
		stored *StoredMember
		epoch  int32
		owned  *Assignment
		action Action
		err    error
	}{
		{"join new", nil, 0, nil, ActionJoin, nil},
		{"rejoin known", dynamic, 0, nil, ActionJoin, nil},
		{"heartbeat current", dynamic, 5, nil, ActionHeartbeat, nil},
		{"unknown member", nil, 5, nil, 0, ErrUnknownMemberID},
		{"epoch from the future", dynamic, 6, nil, 0, ErrFencedMemberEpoch},
		{"previous epoch, owned within assigned", dynamic, 4, ptr(asg(1, 1)), ActionHeartbeat, nil},
		{"previous epoch, owned empty", dynamic, 4, ptr(Assignment{}), ActionHeartbeat, nil},
		{"previous epoch, owns more", dynamic, 4, ptr(asg(1, 1, 2)), 0, ErrFencedMemberEpoch},
		{"previous epoch, owned not sent", dynamic, 4, nil, 0, ErrFencedMemberEpoch},
		{"older epoch", dynamic, 3, ptr(Assignment{}), 0, ErrFencedMemberEpoch},
		{"leave", dynamic, -1, nil, ActionLeave, nil},
		{"leave unknown", nil, -1, nil, 0, ErrUnknownMemberID},
		{"static leave", static, -2, nil, ActionStaticLeave, nil},
		{"static leave without instance id", dynamic, -2, nil, 0, ErrInvalidRequest},
		{"static leave unknown", nil, -2, nil, 0, ErrUnknownMemberID},
		{"epoch below -2", dynamic, -3, nil, 0, ErrInvalidRequest},
	}
	for _, c := range cases {
		action, err := CheckEpoch(c.stored, c.epoch, c.owned)
		if !errors.Is(err, c.err) || (err == nil && action != c.action) {
			t.Errorf("%s: got %v, %v; want %v, %v", c.name, action, err, c.action, c.err)
		}
	}
}
