package controller

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/metadata"
)

// Placement refusals. A refusal's text is the reason alone, written for the
// client that asked; errors.Is tells its kind (the broker maps each kind to
// a Kafka error code).
var (
	ErrInvalidPartitions        = errors.New("controller: invalid number of partitions")
	ErrInvalidReplicationFactor = errors.New("controller: invalid replication factor")
	ErrInvalidReplicaAssignment = errors.New("controller: invalid replica assignment")
)

// refusal is a placement error of one kind with its reason.
type refusal struct {
	kind   error
	reason string
}

func (r refusal) Error() string { return r.reason }
func (r refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, args ...any) error {
	return refusal{kind: kind, reason: fmt.Sprintf(format, args...)}
}

// PlaceTopic places a new topic of partitions partitions with rf replicas
// each on the live brokers (Assign), or refuses: partitions must be in
// [1, maxPartitions] and rf in [1, len(brokers)].
func PlaceTopic(brokers []metadata.BrokerInfo, partitions, rf, maxPartitions int) ([][]int32, error) {
	switch {
	case partitions < 1 || partitions > maxPartitions:
		return nil, refuse(ErrInvalidPartitions, "number of partitions must be in [1, %d], got %d", maxPartitions, partitions)
	case rf < 1:
		return nil, refuse(ErrInvalidReplicationFactor, "replication factor must be at least 1, got %d", rf)
	case rf > len(brokers):
		return nil, refuse(ErrInvalidReplicationFactor, "replication factor: %d larger than available brokers: %d", rf, len(brokers))
	}
	return Assign(brokers, 0, partitions, rf), nil
}

// PlaceAdded places count partitions added to a topic that has current
// partitions of rf replicas each, where they would have been placed had
// the topic been created with them (Assign from current).
func PlaceAdded(brokers []metadata.BrokerInfo, current, count, rf int) ([][]int32, error) {
	if rf > len(brokers) {
		return nil, refuse(ErrInvalidReplicationFactor, "replication factor %d larger than available brokers %d", rf, len(brokers))
	}
	return Assign(brokers, current, count, rf), nil
}

// CheckAssignment checks a replica assignment given by a client: every
// partition has exactly rf replicas (rf > 0), none twice, each a broker
// that live knows.
func CheckAssignment(assignment [][]int32, rf int, live func(node int32) bool) error {
	for p, replicas := range assignment {
		if len(replicas) == 0 || len(replicas) != rf {
			return refuse(ErrInvalidReplicaAssignment, "partition %d: every partition needs the same, non-zero number of replicas", p)
		}
		seen := map[int32]bool{}
		for _, r := range replicas {
			if seen[r] {
				return refuse(ErrInvalidReplicaAssignment, "partition %d: duplicate replica %d", p, r)
			}
			seen[r] = true
			if !live(r) {
				return refuse(ErrInvalidReplicaAssignment, "partition %d: unknown broker %d", p, r)
			}
		}
	}
	return nil
}
