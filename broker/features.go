package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/feature"
	"github.com/strata-log/strata/metadata"
)

// finalizedFeatures holds the cluster's finalized feature levels (stored in
// etcd, see metadata.Features) as last loaded; ApiVersions advertises them.
type finalizedFeatures struct {
	current atomic.Pointer[metadata.Features]
	loadMu  sync.Mutex // one reload at a time, so a newer load is never overwritten by an older
}

// loaded returns the levels in force, or ok false before the first load.
func (f *finalizedFeatures) loaded() (metadata.Features, bool) {
	if c := f.current.Load(); c != nil {
		return *c, true
	}
	return metadata.Features{}, false
}

// startFeatures stores the configured levels if the cluster has none yet
// (the first broker's configuration bootstraps them, as formatting a Kafka
// cluster does), loads the levels in force, and keeps reloading them after
// every change until the broker's lifetime ends.
func (b *Broker) startFeatures(ctx context.Context) error {
	changes := b.store.WatchFeatures(b.lifetime)
	f, err := b.store.BootstrapFeatures(ctx, map[string]int16{feature.TransactionVersion: b.cfg.TransactionVersion})
	if err != nil {
		return err
	}
	b.features.current.Store(&f)
	if l := f.Levels[feature.TransactionVersion]; l != b.cfg.TransactionVersion {
		b.log.Info("the cluster's finalized transaction.version differs from this broker's configured level, "+
			"which applies only when a cluster starts; change it with UpdateFeatures",
			"finalized", l, "configured", b.cfg.TransactionVersion)
	}
	b.loops.Add(1)
	go func() {
		defer b.loops.Done()
		for range changes {
			ctx, cancel := context.WithTimeout(b.lifetime, 10*time.Second)
			err := b.reloadFeatures(ctx)
			cancel()
			if err != nil && b.lifetime.Err() == nil {
				b.log.Warn("reloading finalized features; the next change retries", "err", err)
			}
		}
	}()
	return nil
}

// reloadFeatures loads the finalized levels from etcd.
func (b *Broker) reloadFeatures(ctx context.Context) error {
	b.features.loadMu.Lock()
	defer b.features.loadMu.Unlock()
	f, err := b.store.LoadFeatures(ctx)
	if err != nil {
		return err
	}
	b.features.current.Store(&f)
	return nil
}
