package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/metadata"
)

// Dynamic broker configs: the broker configs Kafka lets an administrator
// change at run time (AlterConfigs and IncrementalAlterConfigs on BROKER
// resources) that Strata has. They are kept in etcd (metadata,
// brokerconfigs/), cluster-wide (resource "") or per broker (resource
// "<node id>"), and every broker applies them as they change (its watch).
// The value in force is, as in Kafka: the broker's own dynamic value, else
// the cluster-wide one, else the static one (strata serve flags); each level
// set shows as a synonym, highest first (DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG).

// dynamicBrokerConfigs are the names that may change, each an integer of
// at least min.
var dynamicBrokerConfigs = map[string]struct{ min int64 }{
	"max.connections":                     {0},
	"max.connections.per.ip":              {0},
	"log.cleaner.backoff.ms":              {0},
	"log.cleaner.io.max.bytes.per.second": {0},
	"log.cleaner.dedupe.buffer.size":      {1 << 10},
	"leader.replication.throttled.rate":   {0},
	"follower.replication.throttled.rate": {0},
}

// ignoredBrokerConfigs are broker configs Kafka 4 accepts and ignores
// (older tools still set them): dropped, never stored.
var ignoredBrokerConfigs = map[string]bool{"log.message.format.version": true}

// checkDynamicBrokerConfig validates one value set by an administrator.
func checkDynamicBrokerConfig(name, value string) (int16, string) {
	d, ok := dynamicBrokerConfigs[name]
	if !ok {
		return kerr.InvalidRequest.Code, fmt.Sprintf("cannot update %q dynamically", name)
	}
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil || v < d.min {
		return kerr.InvalidConfig.Code, fmt.Sprintf("%s=%q: want an integer of at least %d", name, value, d.min)
	}
	return 0, ""
}

// dynamicConfigs holds the dynamic broker configs as last loaded.
type dynamicConfigs struct {
	current atomic.Pointer[metadata.BrokerConfigs]
	applyMu sync.Mutex // one apply at a time, in load order
}

// loaded returns the configs in force (empty before the first load).
func (d *dynamicConfigs) loaded() metadata.BrokerConfigs {
	if c := d.current.Load(); c != nil {
		return *c
	}
	return metadata.BrokerConfigs{Default: map[string]string{}, PerBroker: map[int32]map[string]string{}}
}

// startDynamicConfigs loads and applies the dynamic configs, then keeps
// applying them after every change until the broker's lifetime ends.
func (b *Broker) startDynamicConfigs(ctx context.Context) error {
	changes := b.store.WatchBrokerConfigs(b.lifetime)
	if err := b.reloadDynamicConfigs(ctx); err != nil {
		return err
	}
	b.loops.Add(1)
	go func() {
		defer b.loops.Done()
		for range changes {
			ctx, cancel := context.WithTimeout(b.lifetime, 10*time.Second)
			err := b.reloadDynamicConfigs(ctx)
			cancel()
			if err != nil && b.lifetime.Err() == nil {
				b.log.Warn("reloading dynamic broker configs; the next change retries", "err", err)
			}
		}
	}()
	return nil
}

// reloadDynamicConfigs loads the configs from etcd and applies them.
func (b *Broker) reloadDynamicConfigs(ctx context.Context) error {
	b.dynamic.applyMu.Lock()
	defer b.dynamic.applyMu.Unlock()
	set, err := b.store.LoadBrokerConfigs(ctx)
	if err != nil {
		return err
	}
	b.dynamic.current.Store(&set)
	b.applyDynamicConfigs()
	return nil
}

// applyDynamicConfigs hands the values in force to their owners.
func (b *Broker) applyDynamicConfigs() {
	num := func(name string) int64 {
		v, _ := strconv.ParseInt(b.brokerConfigInForce(name).value, 10, 64)
		return v
	}
	b.connLimits.SetLimits(wire.ConnLimits{MaxConnections: int(num("max.connections")),
		MaxConnectionsPerIP: int(num("max.connections.per.ip"))})
	b.moves.setRate(throttleRate(num("leader.replication.throttled.rate"), num("follower.replication.throttled.rate")))
	if b.cleaner != nil {
		t := compaction.Tuning{Backoff: time.Duration(num("log.cleaner.backoff.ms")) * time.Millisecond,
			IOBytesPerSecond: num("log.cleaner.io.max.bytes.per.second"), DedupeBufferBytes: num("log.cleaner.dedupe.buffer.size")}
		if err := b.cleaner.Tune(t); err != nil {
			b.log.Warn("dynamic log cleaner configs refused; keeping the previous ones", "err", err)
		}
	}
}

// configLevel is one level a broker config's value can come from.
type configLevel struct {
	value  string
	source kmsg.ConfigSource
}

// brokerConfigInForce is a broker config's value in force and, highest
// first, every level that sets it.
func (b *Broker) brokerConfigInForce(name string) brokerConfigValue {
	static := ""
	for _, bc := range brokerConfigs {
		if bc.name == name {
			static = bc.value(&b.cfg, b.advertised)
		}
	}
	out := brokerConfigValue{value: static, source: kmsg.ConfigSourceStaticBrokerConfig}
	if _, ok := dynamicBrokerConfigs[name]; !ok {
		return out
	}
	set := b.dynamic.loaded()
	if v, ok := set.PerBroker[b.cfg.NodeID][name]; ok {
		out.levels = append(out.levels, configLevel{v, kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if v, ok := set.Default[name]; ok {
		out.levels = append(out.levels, configLevel{v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	out.levels = append(out.levels, configLevel{static, kmsg.ConfigSourceStaticBrokerConfig})
	out.value, out.source = out.levels[0].value, out.levels[0].source
	return out
}

// brokerConfigValue is what DescribeConfigs says of one broker config.
type brokerConfigValue struct {
	value  string
	source kmsg.ConfigSource
	levels []configLevel // dynamic configs only: the synonyms, highest first
}

// checkBrokerConfigResource accepts "" (the cluster-wide defaults) and a
// node id.
func checkBrokerConfigResource(name string) (int16, string) {
	if name == "" {
		return 0, ""
	}
	if id, err := strconv.ParseInt(name, 10, 32); err != nil || id < 0 {
		return kerr.InvalidRequest.Code, fmt.Sprintf("broker resource %q is neither \"\" nor a node id", name)
	}
	return 0, ""
}

// replaceBrokerConfigs is AlterConfigs on a broker resource: the given
// dynamic configs replace all of the resource's.
func replaceBrokerConfigs(rr kmsg.AlterConfigsRequestResource) (func(map[string]string) error, int16, string) {
	if code, msg := checkBrokerConfigResource(rr.ResourceName); code != 0 {
		return nil, code, msg
	}
	next, code, msg := alteredConfigs(rr.Configs, func(name string) bool { return ignoredBrokerConfigs[name] })
	if code != 0 {
		return nil, code, msg
	}
	for name, value := range next {
		if code, msg := checkDynamicBrokerConfig(name, value); code != 0 {
			return nil, code, msg
		}
	}
	return replaceWith(next), 0, ""
}

// incrementalBrokerConfigs is IncrementalAlterConfigs on a broker
// resource: SET and DELETE of dynamic configs (none is a list, so APPEND
// and SUBTRACT are INVALID_CONFIG).
func incrementalBrokerConfigs(rr kmsg.IncrementalAlterConfigsRequestResource) (func(map[string]string) error, int16, string) {
	if code, msg := checkBrokerConfigResource(rr.ResourceName); code != 0 {
		return nil, code, msg
	}
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("config %q given twice", c.Name)
		}
		seen[c.Name] = true
		if ignoredBrokerConfigs[c.Name] {
			continue
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return nil, kerr.InvalidConfig.Code, fmt.Sprintf("null value for config %q", c.Name)
			}
			if code, msg := checkDynamicBrokerConfig(c.Name, *c.Value); code != 0 {
				return nil, code, msg
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			if _, ok := dynamicBrokerConfigs[c.Name]; !ok {
				return nil, kerr.InvalidRequest.Code, fmt.Sprintf("cannot update %q dynamically", c.Name)
			}
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("%v is only for list configs; %q is not one", c.Op, c.Name)
		default:
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("unknown config operation %d", c.Op)
		}
	}
	return func(m map[string]string) error {
		for _, c := range rr.Configs {
			if ignoredBrokerConfigs[c.Name] {
				continue
			}
			if c.Op == kmsg.IncrementalAlterConfigOpSet {
				m[c.Name] = *c.Value
			} else {
				delete(m, c.Name)
			}
		}
		return nil
	}, 0, ""
}

// alterBrokerConfigs writes a broker resource's dynamic configs through
// etcd (not when validating only) and applies the result here before
// answering; the other brokers apply it through their watch.
func (b *Broker) alterBrokerConfigs(ctx context.Context, resource string, mutate func(map[string]string) error, validateOnly bool) (int16, string) {
	if validateOnly {
		return 0, ""
	}
	if err := b.store.AlterBrokerConfigs(ctx, resource, mutate); err != nil {
		return errorCode(err)
	}
	if err := b.reloadDynamicConfigs(ctx); err != nil {
		return errorCode(err)
	}
	b.log.Info("dynamic broker configs altered", "resource", resource)
	return 0, ""
}
