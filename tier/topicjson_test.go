package tier

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestTopicFileRoundTrip(t *testing.T) {
	in := TopicFile{Topic: "orders", TopicID: testTopicID.String(), Partitions: 4, Configs: map[string]string{"retention.ms": "1000"}}
	b, err := EncodeTopicFile(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeTopicFile(b)
	in.Version = TopicFileVersion
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
	}
	// Unknown fields from later versions are ignored.
	later := strings.Replace(string(b), `"version":1`, `"version":1,"future":{"x":1}`, 1)
	if _, err := DecodeTopicFile([]byte(later)); err != nil {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestTopicFileRejects(t *testing.T) {
	id := testTopicID.String()
	for _, raw := range []string{
		"", "{", "[]", `{"version":2,"topic":"t","topicId":"` + id + `","partitions":1}`,
		`{"version":1,"topic":"bad/name","topicId":"` + id + `","partitions":1}`,
		`{"version":1,"topic":"t","topicId":"short","partitions":1}`,
		`{"version":1,"topic":"t","topicId":"` + id + `","partitions":0}`,
		`{"version":1,"topic":"t","topicId":"AAAAAAAAAAAAAAAAAAAAAA","partitions":1}`,
		strings.Repeat(" ", MaxTopicFileBytes+1),
	} {
		if _, err := DecodeTopicFile([]byte(raw)); !errors.Is(err, ErrCorruptObject) {
			t.Errorf("DecodeTopicFile(%.60q) = %v, want ErrCorruptObject", raw, err)
		}
	}
	if _, err := EncodeTopicFile(TopicFile{Topic: "t", TopicID: id}); err == nil {
		t.Error("encoded a topic with 0 partitions")
	}
}
