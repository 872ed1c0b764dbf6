package metadata

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Dynamic broker configs (Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG and
// DYNAMIC_BROKER_CONFIG) live under brokerconfigs/: the key "default" holds
// the cluster-wide values, the key "<node id>" one broker's; each value is a
// JSON object of config name to value. Which names may be set, and how they
// parse, is the broker's to decide; the store only bounds the record.

// MaxBrokerConfigs bounds the configs of one record.
const MaxBrokerConfigs = 64

// BrokerConfigs are the dynamic broker configs of the cluster.
type BrokerConfigs struct {
	Default   map[string]string           // cluster-wide; never nil
	PerBroker map[int32]map[string]string // by node id; never nil
}

func (k keys) brokerConfigRoot() string { return k.prefix + "brokerconfigs/" }

// brokerConfigKey is the key of resource: "" for the cluster-wide
// defaults, else a broker's node id.
func (k keys) brokerConfigKey(resource string) (string, error) {
	if resource == "" {
		return k.brokerConfigRoot() + "default", nil
	}
	id, err := strconv.ParseInt(resource, 10, 32)
	if err != nil || id < 0 {
		return "", fmt.Errorf("%w: broker resource %q is not a node id", ErrInvalidConfig, resource)
	}
	return k.brokerConfigRoot() + strconv.FormatInt(id, 10), nil
}

// LoadBrokerConfigs reads every dynamic broker config. Corrupt records are
// logged and skipped.
func (s *Store) LoadBrokerConfigs(ctx context.Context) (BrokerConfigs, error) {
	out := BrokerConfigs{Default: map[string]string{}, PerBroker: map[int32]map[string]string{}}
	resp, err := s.get(ctx, s.keys.brokerConfigRoot(), clientv3.WithPrefix())
	if err != nil {
		return out, err
	}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.keys.brokerConfigRoot())
		configs, err := decodeBrokerConfigs(kv.Value)
		if err != nil {
			s.log.Error("skipping corrupt broker config record", "key", string(kv.Key), "err", err)
			continue
		}
		if name == "default" {
			out.Default = configs
			continue
		}
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil || id < 0 {
			s.log.Error("skipping broker config record of no node", "key", string(kv.Key))
			continue
		}
		out.PerBroker[int32(id)] = configs
	}
	return out, nil
}

func decodeBrokerConfigs(value []byte) (map[string]string, error) {
	var configs map[string]string
	if err := json.Unmarshal(value, &configs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(configs) > MaxBrokerConfigs {
		return nil, fmt.Errorf("%w: %d configs, want at most %d", ErrCorrupt, len(configs), MaxBrokerConfigs)
	}
	return configs, nil
}

// AlterBrokerConfigs runs mutate on the dynamic configs of resource ("" for
// the cluster-wide defaults, else a node id) in one compare-and-swap,
// retried on contention; a record left empty is deleted. mutate's error
// aborts and is returned.
func (s *Store) AlterBrokerConfigs(ctx context.Context, resource string, mutate func(map[string]string) error) error {
	key, err := s.keys.brokerConfigKey(resource)
	if err != nil {
		return err
	}
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		ok, err := alterJSONMap(ctx, s, key, "broker config", decodeBrokerConfigs, func(configs map[string]string) error {
			if err := mutate(configs); err != nil {
				return err
			}
			if len(configs) > MaxBrokerConfigs {
				return fmt.Errorf("%w: more than %d dynamic configs on one broker resource", ErrInvalidConfig, MaxBrokerConfigs)
			}
			return nil
		})
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: broker configs: too much contention", ErrCASFailed)
}

// WatchBrokerConfigs delivers a value after any change of a dynamic broker
// config, with the guarantees of WatchSecurity (call it, then load, then
// reload on every value).
func (s *Store) WatchBrokerConfigs(ctx context.Context) <-chan struct{} {
	return s.watchPrefixes(ctx, s.keys.brokerConfigRoot())
}
