package diskless

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/recordbatch"
)

// TestReadWhenTheHeadMoves: a reader woken by a move of a partition's head
// (a fetch long poll) reads on at once from where it stopped, on a broker
// other than the committing one, before the index applies another event.
// It must find the runs the head covers: a commit's runs reach the index
// before its head.
func TestReadWhenTheHeadMoves(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	writer := newRig(t, endpoints, "dl-wake", time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "dl-wake"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	w := steppedWatcher{Store: store, read: make(chan struct{})}
	ix := NewIndex(w, nil)
	reader := NewReader(ix, writer.bucket, "dl-wake", 0, &Stats{})
	go ix.Run(ctx)
	<-ix.Ready()

	tp := metadata.TierPartition{TopicID: metadata.TopicID{7}, Partition: 0}
	const appends = 20
	done := make(chan error, 1)
	go func() { done <- readEachMove(ctx, ix, reader, w.read, tp, appends) }()
	for i := 0; i < appends; i++ {
		if _, err := writer.app.Append(ctx, tp, batch(fmt.Sprint(i), 1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// steppedWatcher forwards the store's events one at a time and, after each
// head, waits on read: a reader woken by the head sees the index as that
// event left it.
type steppedWatcher struct {
	*metadata.Store
	read chan struct{}
}

func (w steppedWatcher) WatchDiskless(ctx context.Context, rev int64) <-chan metadata.DisklessEvent {
	in := w.Store.WatchDiskless(ctx, rev)
	out := make(chan metadata.DisklessEvent)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Kind != metadata.DisklessHeadPut {
				continue
			}
			select {
			case <-w.read:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// readEachMove waits for each of moves head moves of tp and reads from
// where the last read stopped, then lets the watcher go on.
func readEachMove(ctx context.Context, ix *Index, r *Reader, read chan<- struct{}, tp metadata.TierPartition, moves int) error {
	var offset int64
	_, _, changed := ix.Positions(tp)
	for i := 0; i < moves; i++ {
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("head move %d never came", i)
		}
		var next int64
		_, next, changed = ix.Positions(tp)
		data, err := r.Read(ctx, tp, offset, 1<<20, 1<<62)
		if err != nil {
			return fmt.Errorf("read at %d with the head at %d: %w", offset, next, err)
		}
		for len(data) > 0 {
			h, err := recordbatch.CheckStored(data)
			if err != nil {
				return err
			}
			offset, data = h.LastOffset()+1, data[h.Size():]
		}
		if offset != next {
			return fmt.Errorf("read up to %d with the head at %d", offset, next)
		}
		read <- struct{}{}
	}
	return nil
}

// TestIndexBehind: positions past an index that stopped following etcd are
// behind while etcd's log end reaches them, past the end beyond it, and
// behind whenever etcd cannot say.
func TestIndexBehind(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	writer := newRig(t, endpoints, "dl-behind", time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "dl-behind"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ix := NewIndex(frozenWatcher{store}, nil)
	go ix.Run(ctx)
	<-ix.Ready()
	tp := metadata.TierPartition{TopicID: metadata.TopicID{9}, Partition: 1}
	for i := range 3 {
		if _, err := writer.app.Append(ctx, tp, batch(fmt.Sprint(i), 1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	positions := []Position{{tp, 0}, {tp, 2}, {tp, 3}, {tp, 4}}
	if got, want := ix.Behind(ctx, store, positions), []bool{false, true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("behind %v, want %v (index at 0, etcd at 3)", got, want)
	}
	if got, want := ix.Behind(ctx, failingHeads{}, positions), []bool{false, true, true, true}; !slices.Equal(got, want) {
		t.Fatalf("behind %v without etcd, want %v", got, want)
	}
}

// frozenWatcher loads the store's snapshot once and then reports nothing:
// an index cut off from etcd after it loaded.
type frozenWatcher struct{ *metadata.Store }

func (frozenWatcher) WatchDiskless(ctx context.Context, rev int64) <-chan metadata.DisklessEvent {
	return make(chan metadata.DisklessEvent)
}

// failingHeads is etcd not answering.
type failingHeads struct{}

func (failingHeads) DisklessHeads(context.Context, []metadata.TierPartition) ([]metadata.DisklessHead, error) {
	return nil, errors.New("etcd unreachable")
}
