package recordbatch

import (
	"errors"
	"testing"
)

func TestSplitProduce(t *testing.T) {
	rules := ProduceRules{MaxMessageBytes: 1 << 20, ProduceVersion: 11}
	two := append(simpleBatch(t, 2, 1000, 4), simpleBatch(t, 1, 2000, 4)...)
	got, err := SplitProduce(two, rules, 0)
	if err != nil || got.Count != 2 || len(got.Records) != len(two) || got.ProducerID != -1 || got.LogAppendTime != -1 {
		t.Fatalf("two batches: %+v, %v", got, err)
	}
	keyless := makeBatch(t, CodecNone, []testRecord{{value: []byte("v"), ts: 1}})
	zstd := makeBatch(t, CodecZstd, []testRecord{{key: []byte("k"), ts: 1}})
	small, compacted, v6 := rules, rules, rules
	small.MaxMessageBytes = len(keyless) - 1
	compacted.Compacted = true
	v6.ProduceVersion = 6
	for name, tc := range map[string]struct {
		records []byte
		rules   ProduceRules
		want    error
	}{
		"empty":                        {nil, rules, ErrNoBatches},
		"too large":                    {keyless, small, ErrBatchTooLarge},
		"keyless on a compacted topic": {keyless, compacted, ErrKeylessCompacted},
		"zstd below v7":                {zstd, v6, ErrZstdTooOld},
	} {
		if _, err := SplitProduce(tc.records, tc.rules, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := SplitProduce(zstd, rules, 0); err != nil {
		t.Errorf("zstd on v11: %v", err)
	}
	stamp := simpleBatch(t, 1, 1000, 4)
	rules.LogAppendTime = true
	if got, err := SplitProduce(stamp, rules, 5000); err != nil || got.LogAppendTime != 5000 {
		t.Fatalf("LogAppendTime: %+v, %v", got, err)
	}
	if h, err := ValidateStored(stamp); err != nil || !h.LogAppendTime() || h.MaxTimestamp != 5000 {
		t.Fatalf("stamped header %+v, %v", h, err)
	}
}
