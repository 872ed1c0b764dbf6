package broker

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/metadata"
)

// TestRestoreRequestDiskless: a diskless topic's restore gets empty
// replica lists whatever the replication factor, no leader epochs or tier
// log starts, and per partition a head from its log start to one past its
// last entry (empty at 0 without entries).
func TestRestoreRequestDiskless(t *testing.T) {
	id, err := metadata.NewTopicID()
	if err != nil {
		t.Fatal(err)
	}
	req := RestoreTopicRequest{Name: "events", TopicID: id.String(), Partitions: 3, ReplicationFactor: 3,
		Configs: map[string]string{"diskless.enable": "true"}, LeaderEpochs: []int32{1, 1, 1},
		LogStarts: map[int32]int64{1: 150},
		Entries: []RestoreEntry{
			{Partition: 0, BaseOffset: 0, LastOffset: 99, Key: "a", Size: 1},
			{Partition: 0, BaseOffset: 100, LastOffset: 249, Key: "b", Size: 1},
			{Partition: 1, BaseOffset: 100, LastOffset: 199, Key: "c", Size: 1},
		}}
	out, ranges, err := restoreRequest(req, brokerView{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Topic.Diskless() || len(out.Topic.Replicas) != 3 || len(out.Topic.Replicas[2]) != 0 ||
		out.LeaderEpochs != nil || out.LogStarts != nil || len(out.Entries) != 3 {
		t.Fatalf("request %+v", out)
	}
	want := []string{`{"next":250,"start":0}`, `{"next":200,"start":150}`, `{"next":0,"start":0}`}
	for p, head := range out.DisklessHeads {
		if string(head) != want[p] {
			t.Errorf("partition %d head %s, want %s", p, head, want[p])
		}
	}
	if len(out.DisklessHeads) != 3 || ranges[0] != (restoredRange{0, 250}) || ranges[1] != (restoredRange{150, 200}) {
		t.Fatalf("heads %q, ranges %+v", out.DisklessHeads, ranges)
	}
	req.Partitions = 0
	if _, _, err := restoreRequest(req, brokerView{}); !errors.Is(err, ErrRestore) {
		t.Fatalf("0 partitions: %v", err)
	}
}
