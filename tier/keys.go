package tier

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-log/strata/metadata"
)

// Key layout pieces. Part of the in-bucket format; never change.
const (
	topicsElement    = "topics"
	segmentSuffix    = ".seg"
	topicConfigName  = "topic.json"
	partitionDigits  = 5
	baseOffsetDigits = 20
	uuidTextLen      = 36
)

// SegmentKeyParts are the fields encoded in a segment object's key.
type SegmentKeyParts struct {
	Cluster    string
	Topic      string
	TopicID    metadata.TopicID
	Partition  int32
	BaseOffset int64
	Epoch      int32  // upload leader epoch
	UUID       string // 36-character random UUID text
}

// TopicDir is "<cluster>/topics/<topic>-<topicId>". Store keys start at
// <cluster>: the backend prepends the URL's <prefix> itself.
func TopicDir(cluster, topic string, id metadata.TopicID) string {
	return cluster + "/" + topicsElement + "/" + topic + "-" + id.String()
}

// PartitionPrefix is the List prefix of one partition's objects (ends in '/').
func PartitionPrefix(cluster, topic string, id metadata.TopicID, partition int32) string {
	return fmt.Sprintf("%s/%0*d/", TopicDir(cluster, topic, id), partitionDigits, partition)
}

// TopicConfigKey is the key of the topic's topic.json.
func TopicConfigKey(cluster, topic string, id metadata.TopicID) string {
	return TopicDir(cluster, topic, id) + "/" + topicConfigName
}

// SegmentKey is the key of a segment object. p.UUID empty draws a new one.
func SegmentKey(p SegmentKeyParts) (string, error) {
	if p.UUID == "" {
		p.UUID = NewUUID()
	}
	if p.Partition < 0 || p.BaseOffset < 0 || p.Epoch < 0 || !validUUID(p.UUID) {
		return "", fmt.Errorf("tier: invalid segment key parts %+v", p)
	}
	return fmt.Sprintf("%s%0*d-%d-%s%s", PartitionPrefix(p.Cluster, p.Topic, p.TopicID, p.Partition),
		baseOffsetDigits, p.BaseOffset, p.Epoch, p.UUID, segmentSuffix), nil
}

// ParseSegmentKey reads back a key made by SegmentKey (restore and the
// orphan sweeper list the bucket and parse keys). Errors wrap ErrCorruptObject.
func ParseSegmentKey(key string) (SegmentKeyParts, error) {
	var p SegmentKeyParts
	elements := strings.Split(key, "/")
	if len(elements) != 5 || elements[1] != topicsElement {
		return p, corruptf("key %q is not a segment key", key)
	}
	p.Cluster = elements[0]
	if err := parseTopicElement(elements[2], &p); err != nil {
		return p, fmt.Errorf("key %q: %w", key, err)
	}
	if err := parseSegmentFields(elements[3], elements[4], &p); err != nil {
		return p, fmt.Errorf("key %q: %w", key, err)
	}
	return p, nil
}

func parseTopicElement(element string, p *SegmentKeyParts) error {
	const idLen = 22
	if len(element) < idLen+2 || element[len(element)-idLen-1] != '-' {
		return corruptf("topic element %q", element)
	}
	p.Topic = element[:len(element)-idLen-1]
	id, err := metadata.ParseTopicID(element[len(element)-idLen:])
	if err != nil {
		return corruptf("topic id: %v", err)
	}
	p.TopicID = id
	if err := metadata.ValidateTopicName(p.Topic); err != nil {
		return corruptf("topic: %v", err)
	}
	return nil
}

func parseSegmentFields(partition, name string, p *SegmentKeyParts) error {
	part, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || len(partition) != partitionDigits || part < 0 {
		return corruptf("partition element %q", partition)
	}
	p.Partition = int32(part)
	name, ok := strings.CutSuffix(name, segmentSuffix)
	fields := strings.SplitN(name, "-", 3)
	if !ok || len(fields) != 3 || len(fields[0]) != baseOffsetDigits {
		return corruptf("segment name %q", name)
	}
	base, err1 := strconv.ParseInt(fields[0], 10, 64)
	epoch, err2 := strconv.ParseInt(fields[1], 10, 32)
	if err1 != nil || err2 != nil || base < 0 || epoch < 0 || !validUUID(fields[2]) {
		return corruptf("segment name %q", name)
	}
	p.BaseOffset, p.Epoch, p.UUID = base, int32(epoch), fields[2]
	return nil
}

// NewUUID returns a random (version 4) UUID in its 36-character text form.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func validUUID(s string) bool {
	if len(s) != uuidTextLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
