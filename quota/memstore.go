package quota

import (
	"context"
	"maps"
	"sync"
)

// MemStore is an in-memory Store, for tests and embedded uses: Set
// changes the quotas and signals every watcher, as an etcd write would.
type MemStore struct {
	mu struct {
		sync.Mutex
		entries  map[Entity]map[string]float64
		watchers []chan struct{}
	}
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns a store holding entries (copied).
func NewMemStore(entries map[Entity]map[string]float64) *MemStore {
	s := &MemStore{}
	s.mu.entries = map[Entity]map[string]float64{}
	for e, v := range entries {
		s.mu.entries[e] = maps.Clone(v)
	}
	return s
}

// Set replaces e's quotas (nil or empty: removes the entity) and signals
// the watchers.
func (s *MemStore) Set(e Entity, values map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(values) == 0 {
		delete(s.mu.entries, e)
	} else {
		s.mu.entries[e] = maps.Clone(values)
	}
	for _, w := range s.mu.watchers {
		select {
		case w <- struct{}{}:
		default: // coalesced: a signal is already pending
		}
	}
}

// Quotas returns a copy of every entity's quotas.
func (s *MemStore) Quotas(ctx context.Context) (map[Entity]map[string]float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Entity]map[string]float64, len(s.mu.entries))
	for e, v := range s.mu.entries {
		out[e] = maps.Clone(v)
	}
	return out, nil
}

// WatchSecurity signals each Set, coalesced to one pending signal. The
// channel stays open after ctx ends (Store allows closing it, not more).
func (s *MemStore) WatchSecurity(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.mu.watchers = append(s.mu.watchers, ch)
	s.mu.Unlock()
	return ch
}
