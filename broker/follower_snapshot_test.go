package broker

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// TestTieredProducerSnapshotRestartsFollowerState: every uploaded object
// carries the producer state at its end; the follower's look-up finds it
// only for an exact end; a log reset with it recognises a retry of the
// last idempotent batch before the reset offset, which empty state would
// have appended again.
func TestTieredProducerSnapshotRestartsFollowerState(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(mem))
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "ps", 1, map[string]*string{"internal.segment.bytes": kadm.StringPtr("65536")})
	produceTiered(t, tb.b, "ps", 1, 0, 400) // kgo producers are idempotent by default
	waitAllUploaded(t, tb.b, "ps", 1, 30*time.Second)
	p, _ := tb.b.parts.lookup("ps", 0)
	entries := p.manifest.Segments(p.topicID, p.index)
	ctx := testCtx(t)
	for _, e := range entries {
		r, err := tier.OpenObject(ctx, mem, e.Key, e.Size)
		if err != nil {
			t.Fatal(err)
		}
		at, ok := r.Index.ProducerSnapshotOffset()
		if !ok || at != e.LastOffset+1 {
			t.Fatalf("object %s: producer snapshot (%d, %v), want at %d", e.Key, at, ok, e.LastOffset+1)
		}
		if n := binary.BigEndian.Uint32(r.Index.ProducerSnapshot[14:]); n == 0 {
			t.Fatalf("object %s: snapshot holds no producer", e.Key)
		}
	}
	last := entries[len(entries)-1]
	end := last.LastOffset + 1
	if _, err := tb.b.coldSrc.ProducerSnapshot(ctx, tp(p), end-1); !errors.Is(err, tier.ErrNoProducerSnapshot) {
		t.Fatalf("look-up at an offset no object ends at: %v", err)
	}
	snap, err := tb.b.coldSrc.ProducerSnapshot(ctx, tp(p), end)
	if err != nil {
		t.Fatal(err)
	}
	retry := lastBatchOf(t, mem, last)
	for _, withSnapshot := range []bool{false, true} {
		l, err := hotlog.Open(hotlog.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if withSnapshot {
			err = l.ResetToWithProducerSnapshot(end, snap)
		} else {
			err = l.ResetTo(end)
		}
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(append([]byte(nil), retry...), 1)
		if err != nil || res.Duplicate != withSnapshot || (withSnapshot && res.LastOffset != last.LastOffset) {
			t.Fatalf("snapshot %v: retry of the batch ending at %d gave %+v, %v", withSnapshot, last.LastOffset, res, err)
		}
	}
}

// lastBatchOf returns the bytes of the last batch of e's object.
func lastBatchOf(t *testing.T, store objstore.ObjectStore, e metadata.TierEntry) []byte {
	t.Helper()
	r, err := tier.OpenObject(testCtx(t), store, e.Key, e.Size)
	if err != nil {
		t.Fatal(err)
	}
	all, err := r.ReadBatches(testCtx(t), e.BaseOffset, int(e.Size))
	if err != nil {
		t.Fatal(err)
	}
	for len(all) > 0 {
		h, err := recordbatch.ParseHeader(all)
		if err != nil {
			t.Fatal(err)
		}
		if h.LastOffset() == e.LastOffset {
			if h.ProducerID < 0 {
				t.Fatalf("last batch of %s is not idempotent", e.Key)
			}
			return all[:h.Size()]
		}
		all = all[h.Size():]
	}
	t.Fatalf("no batch of %s ends at %d", e.Key, e.LastOffset)
	return nil
}
