package metadata_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

func TestRestoreTopic(t *testing.T) {
	s := openStore(t, metadatatest.StartEmbedded(t), fmt.Sprintf("restore-%d", time.Now().UnixNano()))
	ctx := testCtx(t)
	id, err := metadata.NewTopicID()
	if err != nil {
		t.Fatal(err)
	}
	// 3 partitions x 90 entries: more than one transaction's worth.
	req := metadata.RestoreTopicRequest{
		Topic:        metadata.Topic{Name: "orders", ID: id, Replicas: [][]int32{{1}, {1}, {1}}, Configs: map[string]string{"retention.ms": "-1"}},
		LeaderEpochs: []int32{4, 0, 9},
		LogStarts:    map[int32]int64{2: 150},
	}
	for p := int32(0); p < 3; p++ {
		for i := int64(0); i < 90; i++ {
			req.Entries = append(req.Entries, tierEntry(id, p, i*100, i*100+99, fmt.Sprintf("k-%d-%d", p, i)))
		}
	}
	got, err := s.RestoreTopic(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || len(got.Replicas) != 3 || got.Configs["retention.ms"] != "-1" {
		t.Fatalf("restored topic %+v", got)
	}
	states, err := s.PartitionStates(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range []int32{4, 0, 9} {
		if states[p].LeaderEpoch != want || states[p].Leader != 1 || states[p].Version == 0 {
			t.Fatalf("partition %d state %+v, want epoch %d", p, states[p], want)
		}
	}
	for p := int32(0); p < 3; p++ {
		entries, err := s.TierEntries(ctx, id, p)
		if err != nil || len(entries) != 90 || entries[89].LastOffset != 8999 || entries[5].Key != fmt.Sprintf("k-%d-5", p) {
			t.Fatalf("partition %d: %d entries, err %v", p, len(entries), err)
		}
	}
	if start, err := s.TierLogStart(ctx, id, 2); err != nil || start != 150 {
		t.Fatalf("log start %d %v", start, err)
	}
	// Rerunning, or restoring another incarnation under the same name, is refused.
	if _, err := s.RestoreTopic(ctx, req); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("second restore: %v", err)
	}
	other, _ := metadata.NewTopicID()
	req2 := req
	req2.Topic.ID, req2.Entries, req2.LogStarts = other, nil, nil
	if _, err := s.RestoreTopic(ctx, req2); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("same name, other id: %v", err)
	}
	// An entry of another topic id is rejected before anything is written.
	req3 := metadata.RestoreTopicRequest{Topic: metadata.Topic{Name: "x", ID: other, Replicas: [][]int32{{1}}},
		LeaderEpochs: []int32{0}, Entries: []metadata.TierEntry{tierEntry(id, 0, 0, 1, "k")}}
	if _, err := s.RestoreTopic(ctx, req3); !errors.Is(err, metadata.ErrTierEntryInvalid) {
		t.Fatalf("foreign entry: %v", err)
	}
	// The producer-id allocator is raised past restored producers, never lowered.
	if first, err := s.AllocateProducerIDs(ctx, 10); err != nil || first != 0 {
		t.Fatalf("first block %d %v", first, err)
	}
	if err := s.RaiseNextProducerID(ctx, 5000); err != nil {
		t.Fatal(err)
	}
	if err := s.RaiseNextProducerID(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if next, err := s.AllocateProducerIDs(ctx, 10); err != nil || next != 5000 {
		t.Fatalf("block after the raise starts at %d (%v), want 5000", next, err)
	}
}

// TestRestoreDisklessTopic: a diskless topic comes back with its empty
// replica lists, its manifest and one head per partition (more than one
// transaction's worth), and no partition states; the shapes that mix the
// two kinds are refused before anything is written.
func TestRestoreDisklessTopic(t *testing.T) {
	s := openStore(t, metadatatest.StartEmbedded(t), fmt.Sprintf("restore-dl-%d", time.Now().UnixNano()))
	ctx := testCtx(t)
	id, err := metadata.NewTopicID()
	if err != nil {
		t.Fatal(err)
	}
	const partitions = 150
	dl := map[string]string{"diskless.enable": "true"}
	req := metadata.RestoreTopicRequest{
		Topic: metadata.Topic{Name: "events", ID: id, Replicas: metadata.DisklessAssignment(partitions), Configs: dl},
	}
	for p := int32(0); p < partitions; p++ {
		req.Entries = append(req.Entries, tierEntry(id, p, 0, 99, fmt.Sprintf("k-%d", p)))
		req.DisklessHeads = append(req.DisklessHeads, fmt.Appendf(nil, `{"next":100,"start":%d}`, p))
	}
	for _, bad := range []struct {
		name string
		edit func(r *metadata.RestoreTopicRequest)
	}{
		{"replicas", func(r *metadata.RestoreTopicRequest) { r.Topic.Replicas = [][]int32{{1}} }},
		{"no heads", func(r *metadata.RestoreTopicRequest) { r.DisklessHeads = nil }},
		{"an empty head", func(r *metadata.RestoreTopicRequest) { r.DisklessHeads[3] = nil }},
		{"heads of a classic topic", func(r *metadata.RestoreTopicRequest) {
			r.Topic.Configs, r.Topic.Replicas = nil, [][]int32{{1}}
			r.LeaderEpochs, r.Entries, r.DisklessHeads = []int32{0}, nil, [][]byte{[]byte(`{"next":1}`)}
		}},
	} {
		r := req
		r.DisklessHeads = append([][]byte(nil), req.DisklessHeads...)
		bad.edit(&r)
		if _, err := s.RestoreTopic(ctx, r); err == nil {
			t.Fatalf("%s: restored", bad.name)
		}
	}
	if _, err := s.Topic(ctx, "events"); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("a refused restore wrote the topic: %v", err)
	}
	got, err := s.RestoreTopic(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || !got.Diskless() || len(got.Replicas) != partitions || len(got.Replicas[0]) != 0 {
		t.Fatalf("restored topic %+v", got)
	}
	states, err := s.PartitionStates(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for p, st := range states {
		if st.Version != 0 {
			t.Fatalf("partition %d has a stored state %+v: diskless partitions have none", p, st)
		}
	}
	parts := make([]metadata.TierPartition, partitions)
	for p := range parts {
		parts[p] = metadata.TierPartition{TopicID: id, Partition: int32(p)}
	}
	var heads []metadata.DisklessHead
	for chunk := range slices.Chunk(parts, 100) { // etcd's --max-txn-ops
		got, err := s.DisklessHeads(ctx, chunk)
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, got...)
	}
	for p, h := range heads {
		if want := fmt.Sprintf(`{"next":100,"start":%d}`, p); string(h.Value) != want {
			t.Fatalf("partition %d head %q, want %q", p, h.Value, want)
		}
	}
	if entries, err := s.TierEntries(ctx, id, partitions-1); err != nil || len(entries) != 1 || entries[0].Key != fmt.Sprintf("k-%d", partitions-1) {
		t.Fatalf("last partition's manifest %+v, %v", entries, err)
	}
}
