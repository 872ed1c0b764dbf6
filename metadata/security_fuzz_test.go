package metadata

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeSecurity: the decoders of scram/, acls/ and quotas/ values and
// keys reject bad bytes without panicking, and what they accept is valid
// and survives a re-encode unchanged.
func FuzzDecodeSecurity(f *testing.F) {
	f.Add("alice/SCRAM-SHA-256", []byte(`{"salt":"AAAA","iterations":4096,"storedKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","serverKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Add("user=a%2Cb,client-id=<default>", []byte(`{"resourceType":2,"resourceName":"t","patternType":3,"principal":"User:a","host":"*","operation":3,"permission":3}`))
	f.Add("client-id=app", []byte(`{"producer_byte_rate":1048576}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		if user, c, err := parseScramKV(key, value); err == nil {
			if c.Validate() != nil || !validSecurityName(user) {
				t.Fatalf("accepted invalid credential %q %+v", user, c)
			}
			again, _ := json.Marshal(scramRecord{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey})
			if back, err := decodeScram(c.Mechanism, again); err != nil || !reflect.DeepEqual(back, c) {
				t.Fatalf("credential round trip: %+v -> %+v (%v)", c, back, err)
			}
		}
		if a, err := decodeACL(value); err == nil {
			again, _ := encodeACL(a)
			if back, err := decodeACL(again); err != nil || back != a || a.Validate() != nil {
				t.Fatalf("ACL round trip: %v -> %v (%v)", a, back, err)
			}
		}
		if q, err := decodeQuotas(value); err == nil {
			again, _ := json.Marshal(q)
			if back, err := decodeQuotas(again); err != nil || !reflect.DeepEqual(back, q) {
				t.Fatalf("quota round trip: %v -> %v (%v)", q, back, err)
			}
		}
		if e, err := parseQuotaEntity(key); err == nil && e.key() != key {
			t.Fatalf("entity %q parsed to %+v which encodes as %q", key, e, e.key())
		}
	})
}
