package metadata

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The cluster's finalized feature levels (Kafka's KIP-584 features) live in
// one key, "features": a JSON object of feature name to level. The first
// broker to start writes the levels it was configured with (create if
// absent, as Kafka's storage format does); after that only UpdateFeatures
// changes them. The key's mod revision is the features epoch clients see.

// maxFeatures bounds the features of the record.
const maxFeatures = 64

// Features are the finalized feature levels and their epoch.
type Features struct {
	Levels map[string]int16 // never nil
	Epoch  int64            // etcd mod revision of the record; 0 if none
}

func (k keys) features() string { return k.prefix + "features" }

func decodeFeatures(value []byte) (map[string]int16, error) {
	var levels map[string]int16
	if err := json.Unmarshal(value, &levels); err != nil {
		return nil, fmt.Errorf("%w: features: %v", ErrCorrupt, err)
	}
	if len(levels) > maxFeatures {
		return nil, fmt.Errorf("%w: %d features, want at most %d", ErrCorrupt, len(levels), maxFeatures)
	}
	return levels, nil
}

// LoadFeatures reads the finalized feature levels. A corrupt record is an
// error: guessing levels could switch a feature on that was switched off.
func (s *Store) LoadFeatures(ctx context.Context) (Features, error) {
	out := Features{Levels: map[string]int16{}}
	resp, err := s.get(ctx, s.keys.features())
	if err != nil || len(resp.Kvs) == 0 {
		return out, err
	}
	levels, err := decodeFeatures(resp.Kvs[0].Value)
	if err != nil {
		return out, err
	}
	if levels != nil {
		out.Levels = levels
	}
	out.Epoch = resp.Kvs[0].ModRevision
	return out, nil
}

// BootstrapFeatures stores levels as the finalized levels if none are
// stored yet, in one transaction, and returns the levels in force.
func (s *Store) BootstrapFeatures(ctx context.Context, levels map[string]int16) (Features, error) {
	value, err := json.Marshal(levels)
	if err != nil {
		return Features{}, err
	}
	key := s.keys.features()
	if _, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(value))}); err != nil {
		return Features{}, err
	}
	return s.LoadFeatures(ctx)
}

// AlterFeatures replaces the finalized levels by next(current) in one
// compare-and-swap, retried on contention; next's error aborts and is
// returned. A corrupt record is replaced.
func (s *Store) AlterFeatures(ctx context.Context, next func(map[string]int16) (map[string]int16, error)) error {
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		ok, err := alterJSONMap(ctx, s, s.keys.features(), "features", decodeFeatures, func(levels map[string]int16) error {
			n, err := next(levels)
			if err != nil {
				return err
			}
			if len(n) > maxFeatures {
				return fmt.Errorf("%w: more than %d features", ErrInvalidConfig, maxFeatures)
			}
			clear(levels)
			for name, l := range n {
				levels[name] = l
			}
			return nil
		})
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: features: too much contention", ErrCASFailed)
}

// WatchFeatures delivers a value after any change of the finalized levels,
// with the guarantees of WatchSecurity.
func (s *Store) WatchFeatures(ctx context.Context) <-chan struct{} {
	return s.watchPrefixes(ctx, s.keys.features())
}
