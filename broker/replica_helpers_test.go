package broker

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
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
	p, code := b.parts.lookup(topic, 0)
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
	testkit.WaitFor(t, 20*time.Second, "condition", func() bool {
		var code int16
		p, code = b.parts.lookup(topic, index)
		return code == 0
	})
	return p
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// sameLog fails unless a and b hold the same bytes from offset from on.
func sameLog(t *testing.T, a, b *hotlog.Log, from int64) {
	t.Helper()
	if a.LogEndOffset() != b.LogEndOffset() {
		t.Fatalf("log ends differ: %d vs %d", a.LogEndOffset(), b.LogEndOffset())
	}
	for off := from; off < a.LogEndOffset(); {
		x, err1 := a.Read(off, 1, a.LogEndOffset())
		y, err2 := b.Read(off, 1, b.LogEndOffset())
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) || len(x) == 0 {
			t.Fatalf("logs differ at %d: %v %v", off, err1, err2)
		}
		h, _ := recordbatch.ParseHeader(x)
		off = h.LastOffset() + 1
	}
}

// raiseLeaderEpoch writes partition 0 of the topic with the same leader at
// the next leader epoch, as a re-election would, and waits until b leads
// it at that epoch. Tests of "an older epoch" need one: a new partition
// starts at epoch 0.
func raiseLeaderEpoch(t *testing.T, b *Broker, topic string, id metadata.TopicID) int32 {
	t.Helper()
	ctx := testCtx(t)
	var next int32
	for {
		states, err := b.store.PartitionStates(ctx, id)
		if err != nil || len(states) == 0 {
			t.Fatalf("partition states: %v", err)
		}
		st := states[0]
		st.LeaderEpoch++
		next = st.LeaderEpoch
		if _, err = b.store.CASPartitionState(ctx, id, 0, st); err == nil {
			break
		} else if !errors.Is(err, metadata.ErrCASFailed) {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 20*time.Second, "leader at the raised epoch", func() bool {
		p, code := b.parts.lookup(topic, 0)
		return code == 0 && p.isLeader() && p.leaderEpoch() == next
	})
	return next
}
