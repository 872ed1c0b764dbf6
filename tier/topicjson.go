package tier

import (
	"encoding/json"
	"fmt"

	"github.com/strata-log/strata/metadata"
)

// MaxTopicFileBytes bounds topic.json (read from the bucket by restore).
const MaxTopicFileBytes = 1 << 20

// TopicFileVersion is the version written into topic.json. Part of the
// in-bucket format; never change (readers reject other versions).
const TopicFileVersion = 1

// TopicFile is the content of <cluster>/topics/<topic>-<topicId>/topic.json
// (DESIGN.md §5): enough to recreate the topic from the bucket alone. It is
// JSON; unknown fields are ignored so that later versions can add some:
//
//	{"version":1,"topic":"orders","topicId":"<22 chars>","partitions":4,
//	 "configs":{"retention.ms":"604800000"}}
//
// configs holds the topic's overrides only, as in etcd.
type TopicFile struct {
	Version    int               `json:"version"`
	Topic      string            `json:"topic"`
	TopicID    string            `json:"topicId"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// EncodeTopicFile validates and encodes a topic.json.
func EncodeTopicFile(f TopicFile) ([]byte, error) {
	f.Version = TopicFileVersion
	if err := f.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("tier: topic.json: %w", err)
	}
	if len(b) > MaxTopicFileBytes {
		return nil, fmt.Errorf("tier: topic.json of %d bytes exceeds %d", len(b), MaxTopicFileBytes)
	}
	return b, nil
}

// DecodeTopicFile decodes and validates a topic.json. Errors wrap ErrCorruptObject.
func DecodeTopicFile(b []byte) (TopicFile, error) {
	var f TopicFile
	if len(b) > MaxTopicFileBytes {
		return f, corruptf("topic.json of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, corruptf("topic.json: %v", err)
	}
	if f.Version != TopicFileVersion {
		return f, corruptf("topic.json version %d", f.Version)
	}
	if err := f.validate(); err != nil {
		return f, corruptf("%v", err)
	}
	return f, nil
}

func (f TopicFile) validate() error {
	if err := metadata.ValidateTopicName(f.Topic); err != nil {
		return fmt.Errorf("tier: topic.json: %w", err)
	}
	if id, err := metadata.ParseTopicID(f.TopicID); err != nil || id.IsZero() {
		return fmt.Errorf("tier: topic.json: topic id %q", f.TopicID)
	}
	if f.Partitions < 1 || f.Partitions > metadata.MaxPartitions {
		return fmt.Errorf("tier: topic.json: %d partitions", f.Partitions)
	}
	return nil
}
