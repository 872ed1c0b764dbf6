package coordinator

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition is one partition of the coordinator topic led here.
type Partition struct {
	Log Log
	// Epoch is the leader epoch the partition is led at (the transaction
	// coordinator writes it into markers as the coordinator epoch).
	Epoch int32
	// Loaded is false while the partition is replayed into the machine;
	// its keys are served once it is true.
	Loaded bool
}

// Partitions is the set of partitions of a coordinator topic this broker
// leads, and the partition count keys are mapped over.
//
// Locking: everything but the count is guarded by the owning coordinator's
// lock (methods ending in Locked require it). The count is atomic because
// keys are mapped without that lock; it is only changed under the lock
// while nothing is led.
type Partitions struct {
	count  atomic.Int32
	led    map[int32]*Partition
	closed bool // nothing is led any more, nor will be
}

// NewPartitions returns a set leading nothing, mapping keys over count
// partitions until AdoptCountLocked changes it.
func NewPartitions(count int32) *Partitions {
	p := &Partitions{led: map[int32]*Partition{}}
	p.count.Store(count)
	return p
}

// Count is the partition count keys are mapped over.
func (p *Partitions) Count() int32 { return p.count.Load() }

// PartitionFor is the partition of key.
func (p *Partitions) PartitionFor(key string) int32 { return PartitionFor(key, p.count.Load()) }

// AdoptCountLocked adopts the partition count of the existing topic, which
// wins over the configured one (as in Kafka). Counts below 1 are ignored.
// It returns false, changing nothing, when n differs while partitions are
// led: the mapping of loaded keys must not change under them.
func (p *Partitions) AdoptCountLocked(n int32) bool {
	if n < 1 || n == p.count.Load() {
		return true
	}
	if len(p.led) > 0 {
		return false
	}
	p.count.Store(n)
	return true
}

// StatusLocked is the error code for a request about key: 0 when a loaded
// partition led here holds it.
func (p *Partitions) StatusLocked(key string) int16 {
	part, ok := p.led[p.PartitionFor(key)]
	switch {
	case !ok:
		return kerr.NotCoordinator.Code
	case !part.Loaded:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// LoadingLocked reports whether a led partition is still loading (a list
// of every key would be incomplete).
func (p *Partitions) LoadingLocked() bool {
	for _, part := range p.led {
		if !part.Loaded {
			return true
		}
	}
	return false
}

// LookupLocked returns the led partition, if it is led here.
func (p *Partitions) LookupLocked(partition int32) (*Partition, bool) {
	part, ok := p.led[partition]
	return part, ok
}

// StillLedLocked reports whether part is still the partition led under
// that number: a load stops applying once leadership moved on.
func (p *Partitions) StillLedLocked(partition int32, part *Partition) bool {
	return p.led[partition] == part
}

// LeadLocked starts leading partition at leader epoch epoch; the caller
// loads the returned partition and sets Loaded. It returns nil when there
// is nothing to do: closed, or already led at that epoch. replaced is true
// when the partition was led at another epoch: leadership was lost and
// regained meanwhile, and the caller must forget what it had loaded of it.
func (p *Partitions) LeadLocked(partition int32, log Log, epoch int32) (part *Partition, replaced bool) {
	if p.closed {
		return nil, false
	}
	if old, ok := p.led[partition]; ok {
		if old.Epoch == epoch {
			return nil, false
		}
		replaced = true
	}
	part = &Partition{Log: log, Epoch: epoch}
	p.led[partition] = part
	return part, replaced
}

// AppendLocked appends batch, holding count records, to a led partition.
// Holding the owner's lock keeps each log in machine order. ErrNotLed if
// the partition is not led here.
func (p *Partitions) AppendLocked(partition int32, batch []byte, count int) (Appended, error) {
	part, ok := p.led[partition]
	if !ok {
		return Appended{}, ErrNotLed
	}
	base, err := part.Log.Append(batch)
	if err != nil {
		return Appended{}, err
	}
	return Appended{Log: part.Log, Base: base, Count: count}, nil
}

// ResignLocked stops leading partition.
func (p *Partitions) ResignLocked(partition int32) { delete(p.led, partition) }

// CloseLocked resigns every partition; later LeadLocked calls do nothing.
func (p *Partitions) CloseLocked() {
	p.closed = true
	p.led = map[int32]*Partition{}
}

// ClosedLocked reports whether CloseLocked was called: no new background
// work may start.
func (p *Partitions) ClosedLocked() bool { return p.closed }
