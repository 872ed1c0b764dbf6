package fetch

import (
	"context"
	"testing"

	"github.com/strata-log/strata/hotlog"
)

// txnFake is a fakePartition with an LSO below the HW and aborted
// transactions; it records the range it was asked about.
type txnFake struct {
	*fakePartition
	lso      int64
	aborted  []hotlog.AbortedTxn
	from, to int64
}

func (p *txnFake) Positions() Positions {
	pos := p.fakePartition.Positions()
	pos.LastStable = p.lso
	return pos
}

func (p *txnFake) AbortedTxns(from, to int64) []hotlog.AbortedTxn {
	p.from, p.to = from, to
	got, _ := hotlog.CollectAbortedTxns(p.aborted, from, to)
	return got
}

func TestFetchReadCommittedStopsAtLSOWithAborts(t *testing.T) {
	p := &txnFake{fakePartition: newFakePartition(100), lso: 6,
		aborted: []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4}, {ProducerID: 8, FirstOffset: 9, LastOffset: 9, LastStableOffset: 10}}}
	p.append(10, true)
	f := newFetcher(t)
	for _, tc := range []struct {
		iso        IsolationLevel
		offset     int64
		wantBytes  int
		wantAborts int
	}{
		{ReadCommitted, 0, 600, 1},    // up to the LSO; the abort of 1-3 overlaps
		{ReadCommitted, 4, 200, 0},    // 4-5: no abort overlaps
		{ReadCommitted, 6, 0, 0},      // at the LSO: nothing yet
		{ReadUncommitted, 0, 1000, 0}, // read_uncommitted: up to the HW, no aborts
	} {
		res := f.Fetch(context.Background(), Request{MaxBytes: 1 << 20, Isolation: tc.iso,
			Partitions: []PartitionRequest{{Partition: p, Offset: tc.offset, MaxBytes: 1 << 20}}})[0]
		if res.Err != nil || len(res.Records) != tc.wantBytes || len(res.AbortedTxns) != tc.wantAborts || res.LastStableOffset != 6 {
			t.Fatalf("%+v: %d bytes, aborts %+v, lso %d, err %v", tc, len(res.Records), res.AbortedTxns, res.LastStableOffset, res.Err)
		}
		if tc.iso == ReadCommitted && tc.wantBytes > 0 && (p.from != tc.offset || p.to != 6) {
			t.Fatalf("%+v: asked for aborts in [%d, %d), want [%d, 6)", tc, p.from, p.to, tc.offset)
		}
	}
	// A byte limit narrows the range asked about to the records returned.
	res := f.Fetch(context.Background(), Request{MaxBytes: 1 << 20, Isolation: ReadCommitted,
		Partitions: []PartitionRequest{{Partition: p, Offset: 0, MaxBytes: 100}}})[0]
	if len(res.Records) != 100 || p.to != 1 || len(res.AbortedTxns) != 0 {
		t.Fatalf("one batch: %d bytes, range to %d, aborts %+v", len(res.Records), p.to, res.AbortedTxns)
	}
}
