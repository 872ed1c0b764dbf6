package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Helpers for tests that need the controller (started by Broker.Start)
// to have elected this broker.

// waitLeading waits until every partition of topic answers ListOffsets
// without an error: its leader was elected and leads.
func waitLeading(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		offsets, err := adm.ListEndOffsets(testCtx(t), topic)
		if err == nil && offsets.Error() == nil && len(offsets[topic]) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not led after 20s: %v %v", topic, err, offsets.Error())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaderEpochOf is the leader epoch partition 0 of topic is led in here.
func leaderEpochOf(t *testing.T, b *Broker, topic string) int32 {
	t.Helper()
	p, code := b.lookupPartition(topic, 0)
	if code != 0 {
		t.Fatalf("partition %s-0: error %d", topic, code)
	}
	return p.leaderEpoch()
}

// waitLookup waits until this broker leads topic's partition index (after
// a restart the controller elects it again with its new registration).
func waitLookup(t *testing.T, b *Broker, topic string, index int32) *partition {
	t.Helper()
	var p *partition
	waitUntil(t, 20*time.Second, func() bool {
		var code int16
		p, code = b.lookupPartition(topic, index)
		return code == 0
	})
	return p
}
