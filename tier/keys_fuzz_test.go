package tier

import (
	"reflect"
	"testing"

	"github.com/strata-log/strata/metadata"
)

// FuzzDecodeTopicFile: a topic.json read from the bucket (restore, replay)
// never panics, and what decodes encodes back to the same file.
func FuzzDecodeTopicFile(f *testing.F) {
	id, err := metadata.NewTopicID()
	if err != nil {
		f.Fatal(err)
	}
	good, err := EncodeTopicFile(TopicFile{Topic: "orders", TopicID: id.String(), Partitions: 4,
		Configs: map[string]string{"retention.ms": "604800000", "cleanup.policy": "compact"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version":1,"topic":"..","topicId":"x","partitions":-1}`))
	f.Add([]byte(`{"version":1,"configs":{"a":"` + string(make([]byte, 40)) + `"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tf, err := DecodeTopicFile(b)
		if err != nil {
			return
		}
		again, err := EncodeTopicFile(tf)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", tf, err)
		}
		back, err := DecodeTopicFile(again)
		if len(tf.Configs) == 0 {
			tf.Configs = nil // omitempty: no configs and {} are one file
		}
		if err != nil || !reflect.DeepEqual(back, tf) {
			t.Fatalf("round trip: %+v -> %+v (%v)", tf, back, err)
		}
	})
}

// FuzzParseSegmentKey: keys listed from the bucket (restore, the orphan
// sweeper) never panic the parser, and a parsed key is the one SegmentKey
// makes from its parts.
func FuzzParseSegmentKey(f *testing.F) {
	id, err := metadata.NewTopicID()
	if err != nil {
		f.Fatal(err)
	}
	key, err := SegmentKey(SegmentKeyParts{Cluster: "c1", Topic: "orders", TopicID: id,
		Partition: 3, BaseOffset: 1234, Epoch: 2})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(key)
	f.Add("c1/topics/orders-AAAAAAAAAAAAAAAAAAAAAA/00003/x.seg")
	f.Add("c1/topics/t/topic.json")
	f.Fuzz(func(t *testing.T, key string) {
		p, err := ParseSegmentKey(key)
		if err != nil {
			return
		}
		again, err := SegmentKey(p)
		if err != nil || again != key {
			t.Fatalf("parsed %q as %+v, which makes %q (%v)", key, p, again, err)
		}
	})
}
