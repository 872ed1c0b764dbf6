package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/strata-log/strata/metadata"
)

func placementBrokers(ids ...int32) []metadata.BrokerInfo {
	out := make([]metadata.BrokerInfo, len(ids))
	for i, id := range ids {
		out[i] = metadata.BrokerInfo{NodeID: id}
	}
	return out
}

func TestPlaceTopic(t *testing.T) {
	three := placementBrokers(1, 2, 3)
	for _, tc := range []struct {
		name           string
		partitions, rf int
		want           error
		reason         string
	}{
		{"placed", 4, 2, nil, ""},
		{"no partitions", 0, 1, ErrInvalidPartitions, "number of partitions must be in [1, 10], got 0"},
		{"too many partitions", 11, 1, ErrInvalidPartitions, "number of partitions must be in [1, 10], got 11"},
		{"rf zero", 1, 0, ErrInvalidReplicationFactor, "replication factor must be at least 1, got 0"},
		{"rf above brokers", 1, 4, ErrInvalidReplicationFactor, "replication factor: 4 larger than available brokers: 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceTopic(three, tc.partitions, tc.rf, 10)
			if tc.want == nil {
				if err != nil || len(got) != tc.partitions || len(got[0]) != tc.rf {
					t.Fatalf("PlaceTopic: %v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || err.Error() != tc.reason || got != nil {
				t.Fatalf("PlaceTopic: %v, %v; want %v %q", got, err, tc.want, tc.reason)
			}
		})
	}
}

func TestPlaceAddedContinuesAssign(t *testing.T) {
	brokers := placementBrokers(1, 2, 3)
	got, err := PlaceAdded(brokers, 2, 3, 2)
	if err != nil || !slices.EqualFunc(got, Assign(brokers, 0, 5, 2)[2:], slices.Equal) {
		t.Fatalf("PlaceAdded: %v, %v", got, err)
	}
	if _, err := PlaceAdded(brokers, 2, 1, 4); !errors.Is(err, ErrInvalidReplicationFactor) ||
		err.Error() != "replication factor 4 larger than available brokers 3" {
		t.Fatalf("PlaceAdded rf 4: %v", err)
	}
}

func TestCheckAssignment(t *testing.T) {
	live := func(node int32) bool { return node >= 1 && node <= 3 }
	for _, tc := range []struct {
		name       string
		assignment [][]int32
		rf         int
		reason     string
	}{
		{"valid", [][]int32{{1, 2}, {2, 3}}, 2, ""},
		{"uneven", [][]int32{{1, 2}, {3}}, 2, "partition 1: every partition needs the same, non-zero number of replicas"},
		{"empty", [][]int32{{}}, 0, "partition 0: every partition needs the same, non-zero number of replicas"},
		{"duplicate", [][]int32{{1, 1}}, 2, "partition 0: duplicate replica 1"},
		{"unknown broker", [][]int32{{1, 7}}, 2, "partition 0: unknown broker 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAssignment(tc.assignment, tc.rf, live)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("CheckAssignment: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidReplicaAssignment) || err.Error() != tc.reason {
				t.Fatalf("CheckAssignment: %v; want %q", err, tc.reason)
			}
		})
	}
}
