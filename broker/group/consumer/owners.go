package consumer

import (
	"errors"
	"fmt"
	"slices"
)

// ErrDoubleOwner: two members own the same partition (a broken invariant,
// reported by NewOwners).
var ErrDoubleOwner = errors.New("consumer: partition owned by two members")

// Owners maps each owned partition (assigned or pending revocation) to its
// member id: Kafka's "current partition epoch" map, the source of
// Reconcile's ownedByOthers. The coordinator owns one per group and keeps it
// in step with the members' states through Update and Remove.
type Owners map[TopicPartition]string

// NewOwners builds the map from the members' states, failing if two
// members own the same partition.
func NewOwners(members map[string]MemberState) (Owners, error) {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	o := Owners{}
	for _, id := range ids {
		for _, tp := range members[id].Owned().Partitions() {
			if other, ok := o[tp]; ok {
				return nil, fmt.Errorf("%w: %s-%d by %s and %s", ErrDoubleOwner, tp.Topic, tp.Partition, other, id)
			}
			o[tp] = id
		}
	}
	return o, nil
}

// OwnedByOthers is Reconcile's ownedByOthers for member id.
func (o Owners) OwnedByOthers(id string) func(TopicID, int32) bool {
	return func(t TopicID, p int32) bool {
		owner, ok := o[TopicPartition{t, p}]
		return ok && owner != id
	}
}

// Update replaces member id's partitions in old by those in next.
func (o Owners) Update(id string, old, next MemberState) {
	o.Remove(id, old)
	for _, tp := range next.Owned().Partitions() {
		o[tp] = id
	}
}

// Remove releases member id's partitions (it left or was fenced).
func (o Owners) Remove(id string, old MemberState) {
	for _, tp := range old.Owned().Partitions() {
		if o[tp] == id {
			delete(o, tp)
		}
	}
}
