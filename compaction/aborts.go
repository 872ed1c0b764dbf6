package compaction

import (
	"cmp"
	"slices"
	"sort"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// abortIndex answers "is this transactional data batch aborted?" from a list
// of hotlog.AbortedTxn. Read-only after newAbortIndex.
type abortIndex map[int64]abortSpans

// abortSpans are one producer's aborted ranges sorted by first offset;
// maxLast[i] is the largest LastOffset among spans[0..i], so overlapping or
// unsorted input is still answered correctly.
type abortSpans struct {
	first   []int64
	maxLast []int64
}

func newAbortIndex(aborted []hotlog.AbortedTxn) abortIndex {
	byProducer := make(map[int64][]hotlog.AbortedTxn)
	for _, a := range aborted {
		byProducer[a.ProducerID] = append(byProducer[a.ProducerID], a)
	}
	idx := make(abortIndex, len(byProducer))
	for pid, list := range byProducer {
		slices.SortFunc(list, func(a, b hotlog.AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
		spans := abortSpans{first: make([]int64, len(list)), maxLast: make([]int64, len(list))}
		for i, a := range list {
			spans.first[i] = a.FirstOffset
			spans.maxLast[i] = a.LastOffset
			if i > 0 {
				spans.maxLast[i] = max(a.LastOffset, spans.maxLast[i-1])
			}
		}
		idx[pid] = spans
	}
	return idx
}

// aborted reports whether h is transactional data of an aborted transaction:
// some abort of its producer has FirstOffset <= h.BaseOffset <= LastOffset.
func (x abortIndex) aborted(h recordbatch.Header) bool {
	if !h.Transactional() || h.Control() {
		return false
	}
	spans, ok := x[h.ProducerID]
	if !ok {
		return false
	}
	// i = number of spans with first <= base.
	i := sort.Search(len(spans.first), func(i int) bool { return spans.first[i] > h.BaseOffset })
	return i > 0 && spans.maxLast[i-1] >= h.BaseOffset
}
