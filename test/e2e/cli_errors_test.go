package e2e

import (
	"strings"
	"testing"
)

// Client commands print the broker's reason (the response's ErrorMessage),
// not only the error code's generic text.
func TestCLIPrintsBrokerReason(t *testing.T) {
	b := StartBroker(t)
	stderr := runStrataFailing(t, "topic", "create", "--brokers", b.Addr, "--config", "retention.ms=soon", "reasoned")
	if !strings.Contains(stderr, "reasoned: INVALID_CONFIG") || !strings.Contains(stderr, `retention.ms`) || !strings.Contains(stderr, `"soon"`) {
		t.Fatalf("topic create with a bad config printed:\n%s\nwant the topic, the code and the broker's reason naming retention.ms and the value", stderr)
	}
	runStrata(t, "topic", "create", "--brokers", b.Addr, "reasoned")
	stderr = runStrataFailing(t, "topic", "alter", "--brokers", b.Addr, "--set", "cleanup.policy=shred", "reasoned")
	if !strings.Contains(stderr, "reasoned: INVALID_CONFIG") || !strings.Contains(stderr, "cleanup.policy") {
		t.Fatalf("topic alter with a bad config printed:\n%s\nwant the broker's reason naming cleanup.policy", stderr)
	}
}
