package broker

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidTopicName is wrapped by validateTopicName's errors.
var ErrInvalidTopicName = errors.New("broker: invalid topic name")

// maxTopicNameLength is Kafka's limit (249), which keeps
// <topic>-<partition> directory names under 255 bytes.
const maxTopicNameLength = 249

// validateTopicName applies Kafka's rules: 1..249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func validateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopicName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopicName, name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidTopicName, maxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q contains %q; only ASCII letters, digits, '.', '_' and '-' are allowed", ErrInvalidTopicName, name, c)
		}
	}
	return nil
}

// collisionKey maps names that collide in metric names ('.' vs '_'), which
// Kafka refuses to have side by side.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// splitList splits a Kafka list config value ("a,b") into trimmed items.
func splitList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
