package diskless

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Head is a partition's head (doc.go, "etcd layout").
//
// Invariant: Start <= Next; every producer's Batches are of its Epoch,
// oldest first, at most maxProducerBatches.
type Head struct {
	Next      int64                    `json:"next"`
	Start     int64                    `json:"start"`
	Producers map[string]*ProducerHead `json:"producers,omitempty"`
}

// ProducerHead is what a head remembers of one idempotent producer.
type ProducerHead struct {
	Epoch   int16           `json:"epoch"`
	Batches []ProducerBatch `json:"batches"`
	// LastMs is when the producer last committed (wall clock of the
	// committing broker), for expiry.
	LastMs int64 `json:"lastMs"`
}

// ProducerBatch is one remembered idempotent batch.
type ProducerBatch struct {
	FirstSeq int32 `json:"firstSeq"`
	LastSeq  int32 `json:"lastSeq"`
	Base     int64 `json:"base"`
	Last     int64 `json:"last"`
}

// Bounds of the head, part of the etcd format.
const (
	// maxProducerBatches is Kafka's max.in.flight bound (5).
	maxProducerBatches = 5
	// maxProducersPerHead bounds a head's producers: past it the least
	// recently committing ones are forgotten (their next batch is then
	// accepted at any sequence, KIP-360). Every commit rewrites the head,
	// so this bounds what a commit writes to etcd (about 300 bytes per
	// producer), well under metadata.MaxDisklessValueBytes.
	maxProducersPerHead = 200
	// producerExpiryMs forgets a producer that has not committed for this
	// long, as Kafka's producer.id.expiration.ms (1 day).
	producerExpiryMs = 24 * 60 * 60 * 1000
)

// decodeHead reads a stored head; nil or empty is the empty head.
func decodeHead(v []byte) (Head, error) {
	h := Head{}
	if len(v) == 0 {
		return h, nil
	}
	if err := json.Unmarshal(v, &h); err != nil {
		return Head{}, fmt.Errorf("%w: head: %v", metadata.ErrCorrupt, err)
	}
	if h.Start < 0 || h.Next < h.Start {
		return Head{}, fmt.Errorf("%w: head start %d next %d", metadata.ErrCorrupt, h.Start, h.Next)
	}
	return h, nil
}

func (h Head) encode() []byte {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err) // only plain fields: cannot fail
	}
	return b
}

// RestoredHead is the stored head of a partition that `strata restore`
// rebuilds from its merged segment objects (doc.go, "Restore"): log start
// start, next offset next (one past the last restored offset), and no
// producers, whose state lived only in the lost etcd. start = next is an
// empty partition whose offsets go on from there.
func RestoredHead(start, next int64) ([]byte, error) {
	if start < 0 || next < start {
		return nil, fmt.Errorf("%w: restored head start %d next %d", ErrOffsetOutOfRange, start, next)
	}
	return Head{Next: next, Start: start}.encode(), nil
}

func (h *Head) clone() Head {
	c := Head{Next: h.Next, Start: h.Start}
	if len(h.Producers) > 0 {
		c.Producers = make(map[string]*ProducerHead, len(h.Producers))
		for id, p := range h.Producers {
			cp := *p
			cp.Batches = append([]ProducerBatch(nil), p.Batches...)
			c.Producers[id] = &cp
		}
	}
	return c
}

// Outcome is what Decide made of one batch.
type Outcome struct {
	// Base and Last are the batch's offsets: new ones for an accepted
	// batch, the original ones for a duplicate.
	Base, Last int64
	// Duplicate: a retry of a committed batch; not committed again.
	Duplicate bool
	// Err refuses the batch (wrapping hotlog.ErrOutOfOrderSequence or
	// hotlog.ErrInvalidProducerEpoch); nothing of it is committed.
	Err error
}

// Decide assigns offsets to a partition's batches, in order, against its
// head, with the idempotent-producer rules of classic partitions
// (hotlog/doc.go, "Producer state"): a retry of one of the producer's last
// five batches is a duplicate with its original offsets; a stale epoch or a
// sequence gap is refused; an unknown producer is accepted at any sequence.
// It returns the new head and one Outcome per header; the head is unchanged
// when nothing was accepted. Pure.
func Decide(head Head, hdrs []recordbatch.Header, nowMs int64) (Head, []Outcome) {
	next := head.clone()
	out := make([]Outcome, len(hdrs))
	for i, h := range hdrs {
		out[i] = next.apply(h, nowMs)
	}
	next.expire(nowMs)
	return next, out
}

func (h *Head) apply(b recordbatch.Header, nowMs int64) Outcome {
	records := int64(b.LastOffsetDelta) + 1
	if b.ProducerID < 0 {
		o := Outcome{Base: h.Next, Last: h.Next + records - 1}
		h.Next += records
		return o
	}
	id := strconv.FormatInt(b.ProducerID, 10)
	p := h.Producers[id]
	if p != nil {
		if dup, ok := p.duplicate(b); ok {
			return Outcome{Base: dup.Base, Last: dup.Last, Duplicate: true}
		}
		if err := p.check(b); err != nil {
			return Outcome{Err: err}
		}
	}
	if p == nil {
		p = &ProducerHead{Epoch: b.ProducerEpoch}
		if h.Producers == nil {
			h.Producers = map[string]*ProducerHead{}
		}
		h.Producers[id] = p
	}
	o := Outcome{Base: h.Next, Last: h.Next + records - 1}
	h.Next += records
	p.add(b, o, nowMs)
	return o
}

func (p *ProducerHead) duplicate(b recordbatch.Header) (ProducerBatch, bool) {
	if p.Epoch != b.ProducerEpoch {
		return ProducerBatch{}, false
	}
	last := lastSequence(b)
	for _, r := range p.Batches {
		if r.FirstSeq == b.BaseSequence && r.LastSeq == last {
			return r, true
		}
	}
	return ProducerBatch{}, false
}

func (p *ProducerHead) check(b recordbatch.Header) error {
	switch {
	case b.ProducerEpoch < p.Epoch:
		return fmt.Errorf("%w: producer %d epoch %d, partition knows epoch %d",
			hotlog.ErrInvalidProducerEpoch, b.ProducerID, b.ProducerEpoch, p.Epoch)
	case b.ProducerEpoch != p.Epoch:
		if b.BaseSequence != 0 {
			return fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0",
				hotlog.ErrOutOfOrderSequence, b.ProducerID, b.ProducerEpoch, b.BaseSequence)
		}
	case len(p.Batches) > 0 && !inSequence(p.Batches[len(p.Batches)-1].LastSeq, b.BaseSequence):
		want := incrementSequence(p.Batches[len(p.Batches)-1].LastSeq, 1)
		return fmt.Errorf("%w: producer %d epoch %d sequence %d, expected %d",
			hotlog.ErrOutOfOrderSequence, b.ProducerID, b.ProducerEpoch, b.BaseSequence, want)
	}
	return nil
}

func (p *ProducerHead) add(b recordbatch.Header, o Outcome, nowMs int64) {
	if p.Epoch != b.ProducerEpoch {
		p.Epoch, p.Batches = b.ProducerEpoch, nil
	}
	if len(p.Batches) == maxProducerBatches {
		p.Batches = append(p.Batches[:0], p.Batches[1:]...)
	}
	p.Batches = append(p.Batches, ProducerBatch{FirstSeq: b.BaseSequence, LastSeq: lastSequence(b), Base: o.Base, Last: o.Last})
	p.LastMs = nowMs
}

// expire forgets the producers idle for producerExpiryMs, then the least
// recently committing ones beyond maxProducersPerHead.
func (h *Head) expire(nowMs int64) {
	for id, p := range h.Producers {
		if nowMs-p.LastMs >= producerExpiryMs {
			delete(h.Producers, id)
		}
	}
	if len(h.Producers) <= maxProducersPerHead {
		return
	}
	ids := make([]string, 0, len(h.Producers))
	for id := range h.Producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return h.Producers[ids[i]].LastMs < h.Producers[ids[j]].LastMs })
	for _, id := range ids[:len(ids)-maxProducersPerHead] {
		delete(h.Producers, id)
	}
}

// lastSequence is the sequence of b's last record; sequences wrap from
// MaxInt32 to 0 as Kafka's.
func lastSequence(b recordbatch.Header) int32 {
	return incrementSequence(b.BaseSequence, b.LastOffsetDelta)
}

func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}
