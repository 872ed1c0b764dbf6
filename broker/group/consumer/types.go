package consumer

import (
	"bytes"
	"encoding/hex"
	"slices"
)

// TopicID is a topic's 16-byte UUID, as in Kafka's topic ids.
type TopicID [16]byte

// Compare orders topic ids bytewise; assignors use it to be deterministic.
func (t TopicID) Compare(o TopicID) int { return bytes.Compare(t[:], o[:]) }

func (t TopicID) String() string { return hex.EncodeToString(t[:]) }

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     TopicID
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	if c := a.Topic.Compare(b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// TopicPartitions is one topic's partitions, sorted, as the wire carries them.
type TopicPartitions struct {
	Topic      TopicID
	Partitions []int32
}

// Assignment is a set of partitions: topic id → partition list.
// Invariant (kept by every function of this package that returns one):
// each list is sorted, free of duplicates and non-empty. nil is empty.
// Partitions from a request must go through NewAssignment: Contains
// relies on the order.
type Assignment map[TopicID][]int32

// NewAssignment builds a normalised assignment from any list of partitions.
func NewAssignment(tps ...TopicPartition) Assignment {
	a := Assignment{}
	for _, tp := range tps {
		a[tp.Topic] = append(a[tp.Topic], tp.Partition)
	}
	for t, ps := range a {
		slices.Sort(ps)
		a[t] = slices.Compact(ps)
	}
	return a
}

// Contains reports whether a holds the partition.
func (a Assignment) Contains(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// Len is the number of partitions in a.
func (a Assignment) Len() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Partitions lists a's partitions sorted by topic id, then partition.
func (a Assignment) Partitions() []TopicPartition {
	out := make([]TopicPartition, 0, a.Len())
	for _, t := range a.topics() {
		for _, p := range a[t] {
			out = append(out, TopicPartition{t, p})
		}
	}
	return out
}

// List is a as sorted TopicPartitions (empty topics omitted).
func (a Assignment) List() []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for _, t := range a.topics() {
		if len(a[t]) > 0 {
			out = append(out, TopicPartitions{t, slices.Clone(a[t])})
		}
	}
	return out
}

func (a Assignment) topics() []TopicID {
	ts := make([]TopicID, 0, len(a))
	for t := range a {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, TopicID.Compare)
	return ts
}

// Clone is a deep copy of a.
func (a Assignment) Clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out[t] = slices.Clone(ps)
		}
	}
	return out
}

// Equal reports whether a and b hold the same partitions.
func (a Assignment) Equal(b Assignment) bool {
	return a.Len() == b.Len() && a.SubsetOf(b)
}

// SubsetOf reports whether every partition of a is in b.
func (a Assignment) SubsetOf(b Assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.Contains(t, p) {
				return false
			}
		}
	}
	return true
}

// Filter is the partitions of a for which keep is true.
func (a Assignment) Filter(keep func(TopicID, int32) bool) Assignment {
	out := Assignment{}
	for t, ps := range a {
		var kept []int32
		for _, p := range ps {
			if keep(t, p) {
				kept = append(kept, p)
			}
		}
		if len(kept) > 0 {
			out[t] = kept
		}
	}
	return out
}

// Intersect is a ∩ b.
func (a Assignment) Intersect(b Assignment) Assignment { return a.Filter(b.Contains) }

// Minus is a − b.
func (a Assignment) Minus(b Assignment) Assignment {
	return a.Filter(func(t TopicID, p int32) bool { return !b.Contains(t, p) })
}

// Union is a ∪ b.
func (a Assignment) Union(b Assignment) Assignment {
	return NewAssignment(append(a.Partitions(), b.Partitions()...)...)
}

// TopicMetadata is what assignors know of a topic.
type TopicMetadata struct {
	ID         TopicID
	Name       string
	Partitions int32
	// Internal topics (__consumer_offsets, __transaction_state) are
	// assigned to members that subscribe to them by name, or by a regular
	// expression that names them literally, never by a broad one.
	Internal bool
}

// MemberSubscription is a member's subscription as its heartbeat states it.
type MemberSubscription struct {
	MemberID   string
	InstanceID string // group.instance.id; "" for a dynamic member
	Rack       string // client.rack; "" when unset (assignors ignore it)
	// Topics are the topic names subscribed: the explicit list and, resolved
	// by the caller, the names matching Regex.
	Topics []string
	// Regex is the subscribed regular expression (RE2/J syntax), kept for
	// description only: this package does not resolve it.
	Regex string
}

// MemberSpec is one member as an assignor sees it.
type MemberSpec struct {
	MemberID   string
	InstanceID string
	Rack       string
	// Topics: subscribed topic ids, sorted, existing topics only.
	Topics []TopicID
	// Current is the member's current target assignment, for stickiness.
	Current Assignment
}

// SpecFor resolves a subscription's topic names against the topics
// (unknown names are dropped: they do not exist yet) and pairs it with the
// member's current target assignment.
func SpecFor(sub MemberSubscription, topics map[TopicID]TopicMetadata, current Assignment) MemberSpec {
	byName := make(map[string]TopicID, len(topics))
	for id, md := range topics {
		byName[md.Name] = id
	}
	var ids []TopicID
	for _, name := range sub.Topics {
		if id, ok := byName[name]; ok {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, TopicID.Compare)
	return MemberSpec{
		MemberID:   sub.MemberID,
		InstanceID: sub.InstanceID,
		Rack:       sub.Rack,
		Topics:     slices.Compact(ids),
		Current:    current,
	}
}
