package quota

import (
	"context"
	"time"
)

// Store is the slice of the metadata store the loader reads
// (*metadata.Store implements it).
type Store interface {
	// Quotas returns every entity's quotas.
	Quotas(ctx context.Context) (map[Entity]map[string]float64, error)
	// WatchSecurity signals changes under quotas/ (and the other security
	// prefixes), coalesced; the channel closes when ctx ends.
	WatchSecurity(ctx context.Context) <-chan struct{}
}

// reloadBackoff is the pause before retrying a failed quota load.
const reloadBackoff = time.Second

// startLoader loads the quotas once (the first request waits for it, so a
// configured quota applies from the first byte) and then reloads them on
// every change until the lifetime ends. Called once, through loadOnce.
func (m *Manager) startLoader() {
	d := m.loader
	if d.store == nil || d.lifetime == nil {
		return
	}
	changes := d.store.WatchSecurity(d.lifetime)
	ctx, cancel := context.WithTimeout(d.lifetime, 5*time.Second)
	err := m.Reload(ctx)
	cancel()
	go m.loop(changes, err != nil)
}

// loop reloads on each change; failed loads are retried.
func (m *Manager) loop(changes <-chan struct{}, retry bool) {
	lifetime := m.loader.lifetime
	for {
		var tick <-chan time.Time
		if retry {
			tick = time.After(reloadBackoff)
		}
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-tick:
		case <-lifetime.Done():
			return
		}
		retry = m.Reload(lifetime) != nil
	}
}

// Reload replaces the quota snapshot with the store's. A failed load
// keeps the previous snapshot. The broker calls it after its own
// AlterClientQuotas so the change applies here at once, before the watch.
func (m *Manager) Reload(ctx context.Context) error {
	d := m.loader
	if d.store == nil {
		return nil
	}
	entries, err := d.store.Quotas(ctx)
	if err != nil {
		if ctx.Err() == nil && d.log != nil {
			d.log.Warn("loading client quotas failed; keeping the previous ones", "err", err)
		}
		return err
	}
	m.config.Store(NewSnapshot(entries))
	return nil
}
