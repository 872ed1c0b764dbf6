package broker

import (
	"bytes"
	"testing"

	"github.com/strata-log/strata/recordbatch"
)

// FuzzProduceRecords feeds arbitrary produce partition data to the batch
// splitter. It must never panic, and whenever it accepts the data, the data
// must be exactly a sequence of valid batches within max.message.bytes
// (stamped with the append time when asked). Seed corpus:
// testdata/fuzz/FuzzProduceRecords.
func FuzzProduceRecords(f *testing.F) {
	good := buildBatch(batchSpec{records: 2, valueSize: 8, timestamp: 1000})
	f.Add(good, false, int32(1<<20))
	f.Add(concatBatches(good, good), true, int32(1<<20))
	f.Add(good[:len(good)-1], false, int32(1<<20))
	f.Add(good, false, int32(len(good)-1))
	f.Fuzz(func(t *testing.T, records []byte, logAppendTime bool, maxMessageBytes int32) {
		const now = 1_700_000_000_000
		original := bytes.Clone(records)
		rules := recordbatch.ProduceRules{MaxMessageBytes: int(maxMessageBytes), LogAppendTime: logAppendTime, ProduceVersion: 11}
		got, err := recordbatch.SplitProduce(records, rules, now)
		if err != nil {
			if code := produceErrorCode(err); code == 0 {
				t.Fatalf("error %v maps to code 0", err)
			}
			return
		}
		if !logAppendTime && !bytes.Equal(records, original) {
			t.Fatal("accepted records were modified without LogAppendTime")
		}
		checkAcceptedBatches(t, got, records, rules, now)
	})
}

// checkAcceptedBatches re-walks accepted records independently.
func checkAcceptedBatches(t *testing.T, got recordbatch.Produced, records []byte, rules recordbatch.ProduceRules, now int64) {
	t.Helper()
	count := 0
	for rest := records; len(rest) > 0; count++ {
		h, size, err := recordbatch.Validate(rest)
		if err != nil {
			t.Fatalf("accepted batch %d invalid: %v", count, err)
		}
		if size > rules.MaxMessageBytes || (h.Transactional() && h.ProducerID < 0) || h.Control() {
			t.Fatalf("accepted batch %d breaks a rule: size %d attrs %x", count, size, h.Attributes)
		}
		if rules.LogAppendTime && (!h.LogAppendTime() || h.MaxTimestamp != now) {
			t.Fatalf("accepted batch %d not stamped", count)
		}
		rest = rest[size:]
	}
	if count == 0 || count != got.Count {
		t.Fatalf("walked %d batches, splitter counted %d", count, got.Count)
	}
}
