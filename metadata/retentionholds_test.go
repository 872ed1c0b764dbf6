package metadata

import (
	"errors"
	"slices"
	"testing"
)

func TestRetentionHoldsRoundTrip(t *testing.T) {
	id, err := newTopicID()
	if err != nil {
		t.Fatal(err)
	}
	holds := []RetentionHold{
		{TopicID: id, Partition: 1, Group: "b", Offset: 7, CommitMs: 2},
		{TopicID: id, Partition: 0, Group: "a", Offset: 42, CommitMs: 1},
	}
	value, err := EncodeRetentionHolds(holds)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRetentionHolds(value)
	if err != nil {
		t.Fatal(err)
	}
	if want := []RetentionHold{holds[1], holds[0]}; !slices.Equal(got, want) {
		t.Fatalf("decoded %+v, want %+v (sorted)", got, want)
	}
	if _, err := decodeRetentionHolds([]byte(`[{"topicId":"short"}]`)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad topic id: %v, want ErrCorrupt", err)
	}
}
