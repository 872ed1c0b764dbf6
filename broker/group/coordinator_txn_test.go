package group

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/coordinator/coordtest"
	"github.com/strata-log/strata/recordbatch"
)

// markerBatch is a transaction marker as the partition side appends it.
func markerBatch(producerID int64, epoch int16, commit bool) []byte {
	k := kmsg.NewControlRecordKey()
	k.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		k.Type = kmsg.ControlRecordKeyTypeCommit
	}
	v := kmsg.NewEndTxnMarker()
	rec := kmsg.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
	inner := rec.AppendTo(nil)[1:]
	body := binary.AppendVarint(nil, int64(len(inner)))
	body = append(body, inner...)
	b := kmsg.RecordBatch{Magic: 2, Attributes: recordbatch.AttrTransactional | recordbatch.AttrControl, ProducerID: producerID,
		ProducerEpoch: epoch, FirstSequence: -1, NumRecords: 1, Records: body}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], recordbatch.Checksum(out[21:]))
	return out
}

func TestTxnCommitPendingUntilMarker(t *testing.T) {
	c := testCoordinator(t)
	log := coordtest.NewMemLog()
	part := c.PartitionFor("g")
	c.BecomeLeader(part, log)
	waitLoaded(t, c, "g")
	tp := TopicPartition{"t", 0}
	commit := func(pid int64, offset int64) {
		t.Helper()
		in := TxnCommitInput{Group: "g", ProducerID: pid, ProducerEpoch: 0, Generation: -1, Offsets: map[TopicPartition]Offset{tp: {Offset: offset, LeaderEpoch: -1}}}
		if code := c.TxnCommit(context.Background(), in); code != 0 {
			t.Fatalf("txn commit: %d", code)
		}
	}
	fetch := func(c *Coordinator) int64 {
		got, _ := c.FetchOffsets("g", nil)
		if o, ok := got[tp]; ok {
			return o.Offset
		}
		return -1
	}
	commit(7, 10)
	if fetch(c) != -1 || !c.Unstable("g")[tp] {
		t.Fatalf("pending commit visible: %d, unstable %v", fetch(c), c.Unstable("g"))
	}
	if _, err := log.Append(markerBatch(7, 0, true)); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(part, 7, true)
	if fetch(c) != 10 || len(c.Unstable("g")) != 0 {
		t.Fatalf("after commit marker: %d %v", fetch(c), c.Unstable("g"))
	}
	commit(8, 20)
	if _, err := log.Append(markerBatch(8, 0, false)); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(part, 8, false)
	if fetch(c) != 10 {
		t.Fatalf("aborted commit applied: %d", fetch(c))
	}
	commit(9, 30) // no marker yet
	// A new coordinator loading the log: committed applied, aborted
	// dropped, the open one pending until its marker.
	c2 := testCoordinator(t)
	c2.BecomeLeader(part, log)
	waitLoaded(t, c2, "g")
	if fetch(c2) != 10 || !c2.Unstable("g")[tp] {
		t.Fatalf("after reload: %d %v", fetch(c2), c2.Unstable("g"))
	}
	c2.CompleteTxn(part, 9, true)
	if fetch(c2) != 30 {
		t.Fatalf("after late marker: %d", fetch(c2))
	}
	// Member checks apply when a member is named.
	in := TxnCommitInput{Group: "g", ProducerID: 9, Generation: 3, Member: MemberRef{MemberID: "nobody"}, Offsets: map[TopicPartition]Offset{tp: {Offset: 1}}}
	if code := c2.TxnCommit(context.Background(), in); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", code)
	}
}
