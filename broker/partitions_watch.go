package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// metadataWatch keeps the broker's mirrors of the cluster metadata in step
// with etcd: the tier manifest, the partition registry and the live broker
// list. It loads a snapshot at start and then applies the watch's events in
// revision order, on one goroutine; when the watch lost events it reloads a
// snapshot. It holds no state of its own: each mirror guards its own.
type metadataWatch struct {
	source   metadataSource
	manifest *tier.Manifest
	parts    *partitionManager
	brokers  brokerList
	log      *slog.Logger
}

// metadataSource is the part of the metadata store the watch reads.
type metadataSource interface {
	Snapshot(ctx context.Context) (metadata.Snapshot, error)
	brokerLister
	// Watch delivers the changes after rev until ctx ends, then closes
	// the channel.
	Watch(ctx context.Context, rev int64) <-chan metadata.Event
}

// brokerList is the broker's cache of the live brokers (cluster.go);
// refresh reloads it from the store.
type brokerList interface {
	set(list []metadata.BrokerInfo)
	refresh(ctx context.Context, store brokerLister, log *slog.Logger)
}

var _ metadataSource = (*metadata.Store)(nil)

// startPartitions opens the logs of every hosted partition, removes
// directories that metadata no longer knows, and starts the watch loop from
// the snapshot's revision, so no change is missed.
func (b *Broker) startPartitions(ctx context.Context) error {
	if err := os.MkdirAll(b.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("broker: data dir: %w", err)
	}
	w := &metadataWatch{source: b.store, manifest: b.manifest, parts: &b.parts, brokers: &b.liveBrks, log: b.log}
	rev, err := w.load(ctx)
	if err != nil {
		return err
	}
	events := w.source.Watch(b.lifetime, rev+1)
	b.loops.Add(2)
	go func() {
		defer b.loops.Done()
		w.run(b.lifetime, events)
	}()
	go b.tickLoop()
	return nil
}

// load fills the mirrors from a snapshot and returns its revision (the
// watch starts after it).
func (w *metadataWatch) load(ctx context.Context) (int64, error) {
	snap, err := w.source.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("broker: metadata snapshot: %w", err)
	}
	w.manifest.LoadSnapshot(snap)
	if err := w.parts.load(snap); err != nil {
		return 0, err
	}
	w.brokers.set(snap.Brokers)
	return snap.Revision, nil
}

// run applies metadata changes until the source closes events (when
// lifetime ends).
func (w *metadataWatch) run(lifetime context.Context, events <-chan metadata.Event) {
	for ev := range events {
		w.apply(lifetime, ev)
	}
}

func (w *metadataWatch) apply(lifetime context.Context, ev metadata.Event) {
	w.manifest.Apply(ev)
	switch ev.Kind {
	case metadata.TopicPut:
		if ev.Topic == nil {
			return
		}
		if err := w.parts.applyTopic(*ev.Topic, nil); err != nil {
			w.log.Error("applying topic", "topic", ev.TopicName, "err", err)
		}
	case metadata.TopicDeleted:
		w.parts.removeTopicAt(ev.TopicName, ev.TopicID, ev.Revision)
	case metadata.PartitionPut:
		if ev.State != nil {
			w.parts.applyPartitionState(ev.TopicID, ev.Partition, *ev.State)
		}
	case metadata.BrokersChanged:
		ctx, cancel := context.WithTimeout(lifetime, 10*time.Second)
		w.brokers.refresh(ctx, w.source, w.log)
		cancel()
	case metadata.Resync:
		w.log.Warn("metadata watch lost events; resynchronising")
		w.resync(lifetime)
	}
}

// resync reloads the mirrors after the watch lost events.
func (w *metadataWatch) resync(lifetime context.Context) {
	ctx, cancel := context.WithTimeout(lifetime, 30*time.Second)
	defer cancel()
	snap, err := w.source.Snapshot(ctx)
	if err != nil {
		w.log.Error("metadata resync failed; the view may be stale", "err", err)
		return
	}
	w.manifest.LoadSnapshot(snap)
	w.parts.resync(snap)
	w.brokers.set(snap.Brokers)
}
