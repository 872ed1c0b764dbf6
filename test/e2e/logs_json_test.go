package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// With --log-format json every line is one JSON object whose keys appear
// once (a logger tagged twice would repeat component=, which JSON readers
// resolve differently). A clean stop logs no error: the embedded etcd's
// closing listeners are not failures.
func TestJSONLogsHaveNoDuplicateKeys(t *testing.T) {
	b := StartBroker(t, withArgs("--log-format", "json"))
	createTopic(t, b.Admin(), "jsonlogs", 1, nil)
	cl := b.Client(kgo.ConsumerGroup("jsonlogs-group"), kgo.ConsumeTopics("jsonlogs"))
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), &kgo.Record{Topic: "jsonlogs", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.PollFetches(testCtx(t, 30*time.Second))
	cl.Close()
	if err := b.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	components := map[string]bool{}
	for _, line := range strings.Split(b.Log(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		keys, err := topLevelKeys([]byte(line))
		if err != nil {
			t.Fatalf("not one JSON object: %v\n%s", err, line)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Fatalf("key %q twice in\n%s", k, line)
			}
			seen[k] = true
		}
		var v struct{ Component, Level, Msg string }
		_ = json.Unmarshal([]byte(line), &v)
		components[v.Component] = true
		if v.Level == "ERROR" {
			t.Errorf("an ERROR line in a clean run and stop:\n%s", line)
		}
	}
	// (The embedded etcd's lines, component=etcd, only exist without
	// STRATA_TEST_ETCD=external.)
	for _, c := range []string{"broker", "controller", "group"} {
		if !components[c] {
			t.Errorf("no line of component %q (saw %v)", c, components)
		}
	}
}

// topLevelKeys lists an object's keys in order, duplicates included.
func topLevelKeys(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
