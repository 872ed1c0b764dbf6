package diskless

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

func idem(pid int64, epoch int16, seq, records int32) recordbatch.Header {
	return recordbatch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: records - 1}
}

func TestDecideAssignsContiguousOffsets(t *testing.T) {
	head := Head{Next: 10, Start: 4}
	next, out := Decide(head, []recordbatch.Header{{ProducerID: -1, LastOffsetDelta: 2}, {ProducerID: -1, LastOffsetDelta: 0}}, 1)
	if out[0].Base != 10 || out[0].Last != 12 || out[1].Base != 13 || out[1].Last != 13 || next.Next != 14 || next.Start != 4 {
		t.Fatalf("outcomes %+v, head %+v", out, next)
	}
	if head.Next != 10 {
		t.Fatalf("Decide changed its input head: %+v", head)
	}
}

func TestDecideDuplicateAnswersOriginalOffsets(t *testing.T) {
	h, out := Decide(Head{}, []recordbatch.Header{idem(7, 0, 0, 3), idem(7, 0, 3, 2)}, 1)
	if out[0].Err != nil || out[1].Err != nil || h.Next != 5 {
		t.Fatalf("first commit: %+v head %+v", out, h)
	}
	// The retry of both batches, in a later object.
	h2, out2 := Decide(h, []recordbatch.Header{idem(7, 0, 0, 3), idem(7, 0, 3, 2)}, 2)
	if !out2[0].Duplicate || out2[0].Base != 0 || out2[0].Last != 2 || !out2[1].Duplicate || out2[1].Base != 3 || h2.Next != 5 {
		t.Fatalf("retry: %+v head %+v", out2, h2)
	}
}

func TestDecideRefusesGapsAndStaleEpochs(t *testing.T) {
	h, _ := Decide(Head{}, []recordbatch.Header{idem(7, 1, 0, 1)}, 1)
	for name, tc := range map[string]struct {
		hdr  recordbatch.Header
		want error
	}{
		"gap":             {idem(7, 1, 5, 1), hotlog.ErrOutOfOrderSequence},
		"stale epoch":     {idem(7, 0, 1, 1), hotlog.ErrInvalidProducerEpoch},
		"new epoch not 0": {idem(7, 2, 3, 1), hotlog.ErrOutOfOrderSequence},
	} {
		next, out := Decide(h, []recordbatch.Header{tc.hdr}, 2)
		if !errors.Is(out[0].Err, tc.want) || next.Next != h.Next {
			t.Errorf("%s: outcome %+v, next %d; want %v and nothing assigned", name, out[0], next.Next, tc.want)
		}
	}
	// A new epoch at 0 and an unknown producer at any sequence are fine.
	_, out := Decide(h, []recordbatch.Header{idem(7, 2, 0, 1), idem(8, 0, 42, 1)}, 2)
	if out[0].Err != nil || out[1].Err != nil {
		t.Fatalf("new epoch / unknown producer refused: %+v", out)
	}
}

func TestDecideRemembersFiveBatches(t *testing.T) {
	h := Head{}
	for seq := int32(0); seq < 7; seq++ {
		h, _ = Decide(h, []recordbatch.Header{idem(1, 0, seq, 1)}, 1)
	}
	if n := len(h.Producers["1"].Batches); n != maxProducerBatches {
		t.Fatalf("remembers %d batches, want %d", n, maxProducerBatches)
	}
	// Sequence 1 was forgotten: its retry is now out of order, not a duplicate.
	_, out := Decide(h, []recordbatch.Header{idem(1, 0, 1, 1)}, 2)
	if out[0].Duplicate || !errors.Is(out[0].Err, hotlog.ErrOutOfOrderSequence) {
		t.Fatalf("retry of a forgotten batch: %+v", out[0])
	}
}

func TestHeadRoundTripAndBounds(t *testing.T) {
	h, _ := Decide(Head{Start: 2, Next: 2}, []recordbatch.Header{idem(3, 1, 0, 4)}, 9)
	back, err := decodeHead(h.encode())
	if err != nil || back.Next != 6 || back.Producers["3"].Batches[0].Last != 5 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{`{"next":1,"start":2}`, `{"next":-1}`, `nope`} {
		if _, err := decodeHead([]byte(bad)); err == nil {
			t.Errorf("decodeHead(%s) accepted", bad)
		}
	}
	many := Head{}
	for pid := int64(0); pid < maxProducersPerHead+10; pid++ {
		many, _ = Decide(many, []recordbatch.Header{idem(pid, 0, 0, 1)}, pid)
	}
	last := fmt.Sprint(maxProducersPerHead + 9)
	if len(many.Producers) != maxProducersPerHead || many.Producers["0"] != nil || many.Producers[last] == nil {
		t.Fatalf("head keeps %d producers; want the %d most recent", len(many.Producers), maxProducersPerHead)
	}
	// A day without a commit forgets a producer.
	idle, _ := Decide(Head{}, []recordbatch.Header{idem(1, 0, 0, 1)}, 1000)
	idle, _ = Decide(idle, []recordbatch.Header{idem(2, 0, 0, 1)}, 1000+producerExpiryMs)
	if idle.Producers["1"] != nil || idle.Producers["2"] == nil {
		t.Fatalf("after a day: producers %v; want only the one that just committed", idle.Producers)
	}
}
