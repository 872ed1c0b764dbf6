package metadata

import (
	"testing"
)

// FuzzDecodeTierEntry: tier manifest values and keys are outside input;
// accepted values survive a re-encode, and keys parse or fail cleanly.
func FuzzDecodeTierEntry(f *testing.F) {
	f.Add([]byte(`{"baseOffset":100,"lastOffset":199,"firstTimestamp":1,"maxTimestamp":2,"leaderEpoch":3,"key":"c/topics/t-x/00000/k.seg","size":4096}`),
		"xNsNb5hiT-2yp_ppOekorg/00003/00000000000000000100")
	f.Add([]byte(`{"baseOffset":-1}`), "xNsNb5hiT-2yp_ppOekorg/00003/log-start")
	f.Add([]byte(`[]`), "bad/key")
	f.Fuzz(func(t *testing.T, value []byte, key string) {
		id, p, base, isStart, err := parseTierKey(key)
		if err != nil {
			id, p, base = TopicID{1}, 0, 100
		}
		if isStart {
			_, _ = decodeCounter(value)
			return
		}
		e, err := decodeTierEntry(id, p, base, value, 7)
		if err != nil {
			return
		}
		again, err := encodeTierEntry(e)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", e, err)
		}
		back, err := decodeTierEntry(id, p, base, again, 7)
		if err != nil || back != e {
			t.Fatalf("round trip changed %+v to %+v (%v)", e, back, err)
		}
	})
}
