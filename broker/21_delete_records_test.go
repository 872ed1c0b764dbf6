package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteRecords(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	id := createDataTopic(t, adm, "dr", 1, nil)
	createDataTopic(t, adm, "compacted", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	producer := newDataClient(t, b)
	for range 4 { // several batches
		produceSyncAll(t, producer, makeTestRecords("dr", 5))
	}
	ctx := testCtx(t)
	deleteTo := func(topic string, offset int64) kadm.DeleteRecordsResponse {
		t.Helper()
		offsets := kadm.Offsets{}
		offsets.AddOffset(topic, 0, offset, -1)
		resps, err := adm.DeleteRecords(ctx, offsets)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resps.Lookup(topic, 0)
		return r
	}
	if r := deleteTo("dr", 7); r.Err != nil || r.LowWatermark != 7 {
		t.Fatalf("delete to 7: %v low watermark %d", r.Err, r.LowWatermark)
	}
	if r := deleteTo("dr", 3); r.Err != nil || r.LowWatermark != 7 {
		t.Fatalf("delete to 3 must not move the log start down: %v low watermark %d", r.Err, r.LowWatermark)
	}
	if r := deleteTo("dr", 21); r.Err != kerr.OffsetOutOfRange {
		t.Fatalf("delete past the HW: %v", r.Err)
	}
	if r := deleteTo("compacted", 0); r.Err != kerr.PolicyViolation {
		t.Fatalf("delete on a compacted topic: %v", r.Err)
	}
	if sp := listOneOffset(t, cl, "dr", -2, -1); sp.Offset != 7 {
		t.Fatalf("ListOffsets earliest %d, want 7", sp.Offset)
	}
	if sp := fetchOnePartition(t, cl, newFetchReq("dr", id, 2, 1, 0)); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below log start: error %d", sp.ErrorCode)
	}
	sp := fetchOnePartition(t, cl, newFetchReq("dr", id, 7, 1, 0))
	if sp.ErrorCode != 0 || sp.LogStartOffset != 7 || len(sp.RecordBatches) == 0 {
		t.Fatalf("fetch at log start: %+v", sp)
	}
	if r := deleteTo("dr", -1); r.Err != nil || r.LowWatermark != 20 {
		t.Fatalf("delete to HW (-1): %v low watermark %d", r.Err, r.LowWatermark)
	}
	// A consumer starting from the beginning now starts at the HW.
	if sp := listOneOffset(t, cl, "dr", -2, -1); sp.Offset != 20 {
		t.Fatalf("ListOffsets earliest %d, want 20", sp.Offset)
	}
}
