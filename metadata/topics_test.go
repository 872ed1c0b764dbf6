package metadata_test

import (
	"testing"

	"github.com/strata-log/strata/metadata"
)

// testTopicIDKnown: a live id is live, a deleted one is recorded as
// deleted (and stays so after the name is reused), an id etcd never had is
// neither.
func testTopicIDKnown(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	check := func(what string, id metadata.TopicID, wantLive, wantDeleted bool) {
		t.Helper()
		live, deleted, err := s.TopicIDKnown(ctx, id)
		if err != nil || live != wantLive || deleted != wantDeleted {
			t.Fatalf("%s: live %v deleted %v err %v, want live %v deleted %v", what, live, deleted, err, wantLive, wantDeleted)
		}
	}
	first, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "k", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	check("created", first.ID, true, false)
	if err := s.DeleteTopic(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	check("deleted", first.ID, false, true)
	second, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "k", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	check("recreated", second.ID, true, false)
	check("old id after recreate", first.ID, false, true)
	unknown, err := metadata.ParseTopicID("AQIDBAUGBwgJCgsMDQ4PEA")
	if err != nil {
		t.Fatal(err)
	}
	check("unknown", unknown, false, false)
	// Another cluster on the same etcd does not see this one's records.
	other := openStore(t, e.endpoints, e.cluster+"-other")
	if live, deleted, err := other.TopicIDKnown(ctx, first.ID); err != nil || live || deleted {
		t.Fatalf("other cluster: live %v deleted %v err %v, want unknown", live, deleted, err)
	}
}
