package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestTopicIDs(t *testing.T) {
	seen := map[TopicID]bool{}
	for range 1000 {
		id, err := newTopicID()
		if err != nil {
			t.Fatal(err)
		}
		if id.IsZero() || seen[id] || id[6]>>4 != 4 || id[8]>>6 != 2 || strings.HasPrefix(id.String(), "-") {
			t.Fatalf("bad or repeated id %x", id)
		}
		seen[id] = true
		back, err := ParseTopicID(id.String())
		if err != nil || back != id {
			t.Fatalf("round trip %s: %x, %v", id, back, err)
		}
	}
	for _, bad := range []string{"", "short", strings.Repeat("!", 22), strings.Repeat("A", 23)} {
		if _, err := ParseTopicID(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseTopicID(%q): %v", bad, err)
		}
	}
}

func TestValidateTopicName(t *testing.T) {
	good := []string{"a", "orders.v1", "__consumer_offsets", "A-b_c.9", strings.Repeat("x", 249)}
	bad := []string{"", ".", "..", "a b", "a/b", "ü", strings.Repeat("x", 250), "a\x00"}
	for _, name := range good {
		if err := ValidateTopicName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range bad {
		if err := ValidateTopicName(name); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q: %v, want ErrInvalidTopic", name, err)
		}
	}
}

func TestTopicCodecRoundTrip(t *testing.T) {
	id, _ := newTopicID()
	topic := Topic{Name: "t", ID: id, Internal: true, Replicas: [][]int32{{1, 2}, {2, 1}}, Configs: map[string]string{"retention.ms": "5"}, Revision: 9}
	value, err := encodeTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeTopic("t", value, 9)
	if err != nil || !reflect.DeepEqual(got, topic) {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	// The documented schema, literally.
	doc := `{"id":"` + id.String() + `","replicas":[[1]],"configs":{"a":"b"},"internal":false,"future":1}`
	if got, err := decodeTopic("t", []byte(doc), 1); err != nil || got.Configs["a"] != "b" {
		t.Fatalf("documented schema: %+v, %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	id, _ := newTopicID()
	topicCases := []string{
		``, `null`, `{}`, `[]`, `{"id":"x","replicas":[[1]]}`,
		`{"id":"AAAAAAAAAAAAAAAAAAAAAA","replicas":[[1]]}`, // zero id
		`{"id":"` + id.String() + `","replicas":[]}`,
		`{"id":"` + id.String() + `","replicas":[[1,1]]}`,
		`{"id":"` + id.String() + `","replicas":[[-1]]}`,
		`{"id":"` + id.String() + `","replicas":[[99999999999]]}`,
	}
	for _, value := range topicCases {
		if _, err := decodeTopic("t", []byte(value), 1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("topic %s: %v, want ErrCorrupt", value, err)
		}
	}
	stateCases := []string{
		``, `{}`, `{"leader":1,"leaderEpoch":0,"replicas":[],"isr":[]}`,
		`{"leader":3,"leaderEpoch":0,"replicas":[1],"isr":[1]}`,
		`{"leader":1,"leaderEpoch":0,"replicas":[1],"isr":[2]}`,
		`{"leader":1,"leaderEpoch":-1,"replicas":[1],"isr":[1]}`,
		`{"leader":1,"leaderEpoch":0,"replicas":[1],"isr":[1,1]}`,
	}
	for _, value := range stateCases {
		if _, err := decodePartitionState([]byte(value), 1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("state %s: %v, want ErrCorrupt", value, err)
		}
	}
	for _, value := range []string{``, `{}`, `{"nodeId":-1,"host":"h","port":1}`, `{"nodeId":1,"host":"","port":1}`, `{"nodeId":1,"host":"h","port":70000}`} {
		if _, err := decodeBroker([]byte(value)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("broker %s: %v, want ErrCorrupt", value, err)
		}
	}
	for _, value := range []string{``, `-1`, `x`, `99999999999999999999`} {
		if _, err := decodeCounter([]byte(value)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("counter %q: %v, want ErrCorrupt", value, err)
		}
	}
}

func TestPartitionKeys(t *testing.T) {
	id, _ := newTopicID()
	k := newKeys("c")
	key := k.partition(id, 42)
	if want := "/strata/c/partitions/" + id.String() + "/00042"; key != want {
		t.Fatalf("key %q, want %q", key, want)
	}
	gotID, p, err := parsePartitionKey(strings.TrimPrefix(key, k.partitions()))
	if err != nil || gotID != id || p != 42 {
		t.Fatalf("parse: %x %d %v", gotID, p, err)
	}
	for _, bad := range []string{"", id.String(), id.String() + "/1", id.String() + "/-0001", id.String() + "/0000x", "x/00001"} {
		if _, _, err := parsePartitionKey(bad); err == nil {
			t.Errorf("parsePartitionKey(%q) accepted", bad)
		}
	}
}

// TestTopicNameProblem pins the words clients see for each rule, and that
// ValidateTopicName keeps its own.
func TestTopicNameProblem(t *testing.T) {
	for name, want := range map[string]string{
		"orders":                 "",
		"":                       "empty",
		"..":                     `".." is not allowed`,
		strings.Repeat("a", 250): "longer than 249 characters",
		"a/b":                    `"a/b" contains '/'; only ASCII letters, digits, '.', '_' and '-' are allowed`,
	} {
		if got := TopicNameProblem(name); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
	if err := ValidateTopicName("a/b"); err == nil || !strings.HasSuffix(err.Error(), `"a/b" contains characters other than [a-zA-Z0-9._-]`) {
		t.Errorf("ValidateTopicName: %v", err)
	}
}

func TestBrokerEndpointByListenerName(t *testing.T) {
	named := BrokerInfo{NodeID: 1, Host: "c1", Port: 1, Endpoints: map[string]string{"CLIENT": "c1:1", "INTERNAL": "i1:11"}}
	unnamed := BrokerInfo{NodeID: 2, Host: "old2", Port: 2} // registered before listener names
	if got := named.Endpoint("INTERNAL"); got != "i1:11" {
		t.Fatalf("named endpoint: %q", got)
	}
	if got := named.Endpoint("OTHER"); got != "c1:1" {
		t.Fatalf("endpoint of an unknown listener: %q, want Host:Port", got)
	}
	if got := unnamed.Endpoint("INTERNAL"); got != "old2:2" {
		t.Fatalf("unnamed endpoint: %q", got)
	}
}

// TestBrokerHTTPAddress: the advertised HTTP address round-trips, a
// registration written before it existed still decodes (no address), and
// an address longer than any host:port is refused.
func TestBrokerHTTPAddress(t *testing.T) {
	in := BrokerInfo{NodeID: 1, Host: "h", Port: 9092, HTTP: "h:9644"}
	value, err := encodeBroker(in)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := decodeBroker(value); err != nil || out.HTTP != "h:9644" {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	old, err := decodeBroker([]byte(`{"nodeId":2,"host":"h","port":9092,"endpoints":{"PLAINTEXT":"h:9092"}}`))
	if err != nil || old.HTTP != "" || old.NodeID != 2 {
		t.Fatalf("registration without http: %+v %v", old, err)
	}
	long := `{"nodeId":1,"host":"h","port":1,"http":"` + strings.Repeat("a", maxBrokerAddr) + `:1"}`
	if _, err := decodeBroker([]byte(long)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("overlong http address: %v, want ErrCorrupt", err)
	}
	if _, err := encodeBroker(BrokerInfo{NodeID: 1, Host: "h", Port: 1, HTTP: strings.Repeat("a", maxBrokerAddr+1)}); err == nil {
		t.Fatal("encoded an overlong http address")
	}
}
