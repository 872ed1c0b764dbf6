package broker

import (
	"context"
	"time"
)

// quotaReloadBackoff is the pause before retrying a failed quota load.
const quotaReloadBackoff = time.Second

// startQuotaLoader loads the quotas from etcd once (the first request
// waits for it, so a configured quota applies from the first byte) and
// then reloads them on every change under quotas/ (metadata.WatchSecurity)
// until the broker's lifetime ends. Called once, through quotas.loadOnce.
func (b *Broker) startQuotaLoader() {
	if b.store == nil || b.lifetime == nil {
		return
	}
	changes := b.store.WatchSecurity(b.lifetime)
	ctx, cancel := context.WithTimeout(b.lifetime, 5*time.Second)
	err := b.loadQuotas(ctx)
	cancel()
	go b.quotaLoop(changes, err != nil)
}

// quotaLoop reloads on each change; failed loads are retried.
func (b *Broker) quotaLoop(changes <-chan struct{}, retry bool) {
	for {
		var tick <-chan time.Time
		if retry {
			tick = time.After(quotaReloadBackoff)
		}
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-tick:
		case <-b.lifetime.Done():
			return
		}
		retry = b.loadQuotas(b.lifetime) != nil
	}
}

// loadQuotas replaces the quota snapshot with etcd's.
func (b *Broker) loadQuotas(ctx context.Context) error {
	entries, err := b.store.Quotas(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("loading client quotas failed; keeping the previous ones", "err", err)
		}
		return err
	}
	b.quotas.config.Store(&quotaConfig{entries: entries})
	return nil
}
