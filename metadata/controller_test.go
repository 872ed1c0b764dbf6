package metadata_test

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-log/strata/metadata"
)

// testGuardedPartitionCAS: a guarded write succeeds only while the guard
// key exists with its create revision; a gone or re-created guard key
// fails with ErrFenced and writes nothing; a stale version with a good
// guard is still ErrCASFailed.
func testGuardedPartitionCAS(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	created, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	guardKey := s.ControllerPrefix() + "test-guard"
	put, err := s.Client().Put(ctx, guardKey, "1")
	if err != nil {
		t.Fatal(err)
	}
	guard := metadata.Guard{Key: guardKey, CreateRevision: put.Header.Revision}
	st := metadata.InitialPartitionState([]int32{1, 2})
	if st.Leader != 1 || st.Version != 0 || len(st.ISR) != 2 || st.LeaderBrokerEpoch != 0 {
		t.Fatalf("initial state %+v", st)
	}
	st.LeaderEpoch, st.LeaderBrokerEpoch = 1, 77
	v1, err := s.CASPartitionStateGuarded(ctx, created.ID, 0, st, guard)
	if err != nil {
		t.Fatalf("guarded create: %v", err)
	}
	if _, err := s.CASPartitionStateGuarded(ctx, created.ID, 0, st, guard); !errors.Is(err, metadata.ErrCASFailed) {
		t.Fatalf("stale version, good guard: %v, want ErrCASFailed", err)
	}
	// Re-creating the key gives it a new create revision: the old holder is fenced.
	if _, err := s.Client().Delete(ctx, guardKey); err != nil {
		t.Fatal(err)
	}
	st.Version, st.LeaderEpoch = v1, 2
	if _, err := s.CASPartitionStateGuarded(ctx, created.ID, 0, st, guard); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("guard gone: %v, want ErrFenced", err)
	}
	if _, err := s.Client().Put(ctx, guardKey, "2", clientv3.WithPrevKV()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CASPartitionStateGuarded(ctx, created.ID, 0, st, guard); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("guard re-created: %v, want ErrFenced", err)
	}
	states, err := s.PartitionStates(ctx, created.ID)
	if err != nil || states[0].Version != v1 || states[0].LeaderEpoch != 1 || states[0].LeaderBrokerEpoch != 77 {
		t.Fatalf("fenced writes changed the state: %+v, %v", states, err)
	}
}
