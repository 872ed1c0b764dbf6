package metadata

import (
	"reflect"
	"testing"
)

// The decoders read etcd values, which are outside input (another version,
// an operator's etcdctl, corruption): they must reject bad bytes without
// panicking, and what they accept must survive a re-encode unchanged.

func FuzzDecodeTopic(f *testing.F) {
	f.Add([]byte(`{"id":"xNsNb5hiT-2yp_ppOekorg","replicas":[[1,2],[2,1]],"configs":{"retention.ms":"1000"}}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		topic, err := decodeTopic("t", value, 1)
		if err != nil {
			return
		}
		again, err := encodeTopic(topic)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := decodeTopic("t", again, 1)
		if err != nil || !reflect.DeepEqual(back, topic) {
			t.Fatalf("round trip changed %+v to %+v (%v)", topic, back, err)
		}
	})
}

func FuzzDecodePartitionState(f *testing.F) {
	f.Add([]byte(`{"leader":1,"leaderEpoch":3,"replicas":[1,2,3],"isr":[1,3]}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		st, err := decodePartitionState(value, 7)
		if err != nil {
			return
		}
		again, err := encodePartitionState(st)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", st, err)
		}
		back, err := decodePartitionState(again, 7)
		if err != nil || !reflect.DeepEqual(back, st) {
			t.Fatalf("round trip changed %+v to %+v (%v)", st, back, err)
		}
	})
}

func FuzzDecodeBroker(f *testing.F) {
	f.Add([]byte(`{"nodeId":1,"host":"127.0.0.1","port":9092,"rack":"r1"}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		b, err := decodeBroker(value)
		if err != nil {
			return
		}
		again, err := encodeBroker(b)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", b, err)
		}
		if back, err := decodeBroker(again); err != nil || !reflect.DeepEqual(back, b) {
			t.Fatalf("round trip changed %+v to %+v (%v)", b, back, err)
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	f.Add("xNsNb5hiT-2yp_ppOekorg/00007", []byte("12"))
	f.Fuzz(func(t *testing.T, key string, counter []byte) {
		if id, p, err := parsePartitionKey(key); err == nil {
			if got := newKeys("c").partition(id, p); got != "/strata/c/partitions/"+key {
				t.Fatalf("key %q parsed to %s/%d which builds %q", key, id, p, got)
			}
		}
		if n, err := decodeCounter(counter); err == nil && n < 0 {
			t.Fatalf("negative counter %d accepted", n)
		}
	})
}
