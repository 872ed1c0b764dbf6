package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/recordbatch"
)

// idempotentBatch is a batch of n records from producer pid, epoch and
// base sequence seq, as an idempotent producer sends it.
func idempotentBatch(pid int64, epoch int16, seq int32, n int) []byte {
	b := buildBatch(batchSpec{records: n, valueSize: 8, producerID: pid, timestamp: time.Now().UnixMilli()})
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], recordbatch.Checksum(b[21:]))
	return b
}

// TestProduceIdempotentRetries: a retried batch is a success with its
// original offset and is stored once; gaps and stale epochs get their
// Kafka codes.
func TestProduceIdempotentRetries(t *testing.T) {
	b, adm, _ := dataPathBroker(t)
	createDataTopic(t, adm, "idem", 1, nil)
	steps := []struct {
		name       string
		acks       int16
		batch      []byte
		wantCode   int16
		wantOffset int64
	}{
		{"first", -1, idempotentBatch(5, 1, 0, 3), 0, 0},
		{"second", 1, idempotentBatch(5, 1, 3, 2), 0, 3},
		{"retry of first, acks=all", -1, idempotentBatch(5, 1, 0, 3), 0, 0},
		{"retry of second, acks=1", 1, idempotentBatch(5, 1, 3, 2), 0, 3},
		{"gap", -1, idempotentBatch(5, 1, 9, 1), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"new epoch not at 0", -1, idempotentBatch(5, 2, 5, 1), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"next", -1, idempotentBatch(5, 1, 5, 1), 0, 5},
		{"new epoch", -1, idempotentBatch(5, 2, 0, 1), 0, 6},
		{"stale epoch", -1, idempotentBatch(5, 1, 6, 1), kerr.InvalidProducerEpoch.Code, -1},
	}
	for _, st := range steps {
		sp := produceRaw(t, b, "idem", st.acks, st.batch)
		if sp.ErrorCode != st.wantCode || (st.wantCode == 0 && sp.BaseOffset != st.wantOffset) {
			t.Fatalf("%s: error %d offset %d, want error %d offset %d", st.name, sp.ErrorCode, sp.BaseOffset, st.wantCode, st.wantOffset)
		}
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "idem")
	if o, ok := ends.Lookup("idem", 0); err != nil || !ok || o.Offset != 7 {
		t.Fatalf("end offset %+v %v, want 7: retries must not be stored", o, err)
	}
	if got := consumeFromStart(t, b, "idem", 7); len(got) != 7 || got[6].Offset != 6 {
		t.Fatalf("consumed %d records, want each of the 7 once", len(got))
	}
}
