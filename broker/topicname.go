package broker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/strata-log/strata/metadata"
)

// ErrInvalidTopicName is wrapped by validateTopicName's errors.
var ErrInvalidTopicName = errors.New("broker: invalid topic name")

// validateTopicName applies Kafka's topic name rules (metadata's), with the
// messages clients see.
func validateTopicName(name string) error {
	if p := metadata.TopicNameProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidTopicName, p)
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
