package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/metadata"
)

// startTestElector plays the controller's election rule for single-broker
// tests: every 20ms, a partition whose leader is not live with the
// registration epoch it was elected with gets the first live ISR member
// (else the first live replica) as leader in the next epoch. It never
// changes an ISR otherwise, so it agrees with the real controller when
// both run (a lost CAS re-reads). Until Broker.Start runs the controller,
// this is what makes test brokers lead.
func startTestElector(t *testing.T, tb *testBroker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	store := tb.store
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			electOnce(ctx, store)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// electOnce applies the election rule to every partition once.
func electOnce(ctx context.Context, store *metadata.Store) {
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return
	}
	live := map[int32]int64{}
	for _, info := range snap.Brokers {
		live[info.NodeID] = info.Epoch
	}
	for _, topic := range snap.Topics {
		for i, st := range snap.Partitions[topic.ID] {
			if epoch, ok := live[st.Leader]; ok && st.LeaderBrokerEpoch == epoch {
				continue
			}
			next, ok := testElect(st, live)
			if !ok {
				continue
			}
			_, err := store.CASPartitionState(ctx, topic.ID, int32(i), next)
			if err != nil && !errors.Is(err, metadata.ErrCASFailed) && ctx.Err() == nil {
				continue
			}
		}
	}
}

func testElect(st metadata.PartitionState, live map[int32]int64) (metadata.PartitionState, bool) {
	pick := int32(-1)
	for _, id := range st.Replicas {
		if _, ok := live[id]; ok && slices.Contains(st.ISR, id) {
			pick = id
			break
		}
	}
	isr := st.ISR
	if pick < 0 {
		for _, id := range st.Replicas {
			if _, ok := live[id]; ok {
				pick, isr = id, []int32{id}
				break
			}
		}
	}
	if pick < 0 {
		return st, false
	}
	next := st
	next.Leader, next.LeaderEpoch, next.LeaderBrokerEpoch, next.ISR = pick, st.LeaderEpoch+1, live[pick], isr
	return next, true
}

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
