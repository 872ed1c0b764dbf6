package e2e

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"time"
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
	if stderr := runStrataFailing(t, "group", "describe", "--brokers", b.Addr, "nosuch"); !strings.Contains(stderr, "group nosuch does not exist") {
		t.Fatalf("group describe of a missing group printed:\n%s", stderr)
	}
}

// produce and consume fail in bounded time, saying why, against no broker
// or a topic that does not exist (auto-creation off), instead of hanging.
func TestProduceConsumeFailClearly(t *testing.T) {
	b := StartBroker(t, withArgs("--auto-create-topics=false"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--brokers", b.Addr, "--topic", "absent"}, "topic absent does not exist"},
		{[]string{"consume", "--brokers", b.Addr, "--topic", "absent"}, "topic absent does not exist"},
		{[]string{"consume", "--brokers", "127.0.0.1:1", "--topic", "absent"}, "no broker answered at 127.0.0.1:1"},
		{[]string{"produce", "--brokers", "127.0.0.1:1", "--topic", "absent"}, "no broker answered at 127.0.0.1:1"},
	} {
		start := time.Now()
		stderr := runStrataFailing(t, c.args...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("strata %v said:\n%s\nwant %q", c.args, stderr, c.want)
		}
		if elapsed := time.Since(start); elapsed > 15*time.Second {
			t.Errorf("strata %v took %v", c.args, elapsed)
		}
	}
}

// Topic ids print in Kafka's form (unpadded base64url) in every command,
// the form the broker's logs and the bucket's keys use.
func TestCLITopicIDForm(t *testing.T) {
	b := StartBroker(t)
	out := runStrata(t, "topic", "create", "--brokers", b.Addr, "idform")
	m := regexp.MustCompile(`id (\S+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("topic create printed %q", out)
	}
	topics, err := b.Admin().ListTopics(testCtx(t, 10*time.Second), "idform")
	if err != nil {
		t.Fatal(err)
	}
	id := topics["idform"].ID
	if want := base64.RawURLEncoding.EncodeToString(id[:]); m[1] != want {
		t.Fatalf("topic create printed id %s, want Kafka's form %s", m[1], want)
	}
	for _, args := range [][]string{{"topic", "describe", "--brokers", b.Addr, "idform"}, {"topic", "list", "--brokers", b.Addr}} {
		if out := runStrata(t, args...); !strings.Contains(out, m[1]) {
			t.Errorf("strata %v does not show id %s:\n%s", args, m[1], out)
		}
	}
}
