package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// String returns Kafka's string form of the id: unpadded base64url, 22
// characters (what Kafka tools print and what keys use).
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is the zero UUID, which Kafka uses for "no id".
func (id TopicID) IsZero() bool { return id == TopicID{} }

// ParseTopicID parses Kafka's string form.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != 22 {
		return id, fmt.Errorf("%w: topic id %q: want 22 characters", ErrCorrupt, s)
	}
	n, err := base64.RawURLEncoding.Decode(id[:], []byte(s))
	if err != nil || n != len(id) {
		return TopicID{}, fmt.Errorf("%w: topic id %q: %v", ErrCorrupt, s, err)
	}
	// The last character carries 2 unused bits: only the canonical form
	// (those bits zero) names the id, so that every id has one string and
	// one bucket directory.
	if id.String() != s {
		return TopicID{}, fmt.Errorf("%w: topic id %q is not in canonical form (%q)", ErrCorrupt, s, id.String())
	}
	return id, nil
}

// newTopicID returns a random version-4 UUID. As Kafka does, it never returns
// the zero id or the reserved metadata-topic id (1), nor one whose string
// form starts with '-' (it would read as a command-line flag).
func newTopicID() (TopicID, error) {
	for {
		var id TopicID
		if _, err := rand.Read(id[:]); err != nil {
			return TopicID{}, fmt.Errorf("metadata: random topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if id.IsZero() || id == (TopicID{15: 1}) || id.String()[0] == '-' {
			continue
		}
		return id, nil
	}
}

// newClusterID returns a Kafka-style cluster id: a random UUID in string form.
func newClusterID() (string, error) {
	id, err := newTopicID()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// MaxTopicNameLength is Kafka's limit on topic names (249), which keeps
// <topic>-<partition> directory names under 255 bytes.
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's rules: 1-249 characters of
// [a-zA-Z0-9._-], and not "." or "..". The error wraps ErrInvalidTopic.
func ValidateTopicName(name string) error {
	switch {
	case TopicNameProblem(name) == "":
		return nil
	case legalNameChars(name) || len(name) > MaxTopicNameLength:
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	return fmt.Errorf("%w: %q contains characters other than [a-zA-Z0-9._-]", ErrInvalidTopic, name)
}

// TopicNameProblem says which of Kafka's topic name rules name breaks, in
// the words the broker's answers give clients; "" for a legal name. It is
// the one statement of the rules (ValidateTopicName words them its own way).
func TopicNameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case name == "." || name == "..":
		return fmt.Sprintf("%q is not allowed", name)
	case len(name) > MaxTopicNameLength:
		return fmt.Sprintf("longer than %d characters", MaxTopicNameLength)
	}
	if i := illegalNameChar(name); i >= 0 {
		return fmt.Sprintf("%q contains %q; only ASCII letters, digits, '.', '_' and '-' are allowed", name, name[i])
	}
	return ""
}

func legalNameChars(s string) bool { return illegalNameChar(s) < 0 }

// illegalNameChar is the index of the first byte of s outside
// [a-zA-Z0-9._-], or -1.
func illegalNameChar(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return i
		}
	}
	return -1
}

func validClusterName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 64 && legalNameChars(s)
}
