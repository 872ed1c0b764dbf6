package broker

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
)

// configEntry is one config as DescribeConfigs (and CreateTopics v5+)
// report it.
type configEntry struct {
	name, value string
	source      kmsg.ConfigSource
	configType  kmsg.ConfigType
	readOnly    bool
	sensitive   bool
	doc         string
	// defaultValue and defaultName (the broker-level name, e.g.
	// log.retention.ms) are reported as the DEFAULT_CONFIG synonym.
	defaultValue, defaultName string
}

// topicConfigEntries lists every topic config: an override
// (DYNAMIC_TOPIC_CONFIG) or the default (DEFAULT_CONFIG), which is the
// broker's own where it has one (brokerDefaults, by topic config name).
// Internal configs are listed only when set, as in Kafka.
func topicConfigEntries(overrides, brokerDefaults map[string]string) []configEntry {
	defs := metadata.TopicConfigDefs()
	out := make([]configEntry, 0, len(defs))
	for _, d := range defs {
		v, set := overrides[d.Name]
		if d.Internal && !set {
			continue
		}
		def := d.Default
		if v, ok := brokerDefaults[d.Name]; ok {
			def = v
		}
		e := configEntry{name: d.Name, value: def, source: kmsg.ConfigSourceDefaultConfig,
			configType: kmsg.ConfigType(d.Type), doc: d.Doc, defaultValue: def, defaultName: d.ServerDefault,
			sensitive: d.Type == metadata.ConfigPassword}
		if e.defaultName == "" {
			e.defaultName = d.Name
		}
		if set {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
		}
		out = append(out, e)
	}
	return out
}

// topicDefaults are the topic configs whose default is a broker flag.
func (c *Config) topicDefaults() map[string]string {
	return map[string]string{"tier.upload.max.lag.ms": strconv.FormatInt(c.Tier.UploadMaxLagMs(), 10)}
}

// brokerConfigEntries lists this broker's static, read-only configs.
func brokerConfigEntries(cfg *Config, advertised metadata.BrokerInfo) []configEntry {
	str := func(name, v string) configEntry {
		return configEntry{name: name, value: v, configType: kmsg.ConfigType(metadata.ConfigString)}
	}
	num := func(name string, v int64, t metadata.ConfigType) configEntry {
		return configEntry{name: name, value: strconv.FormatInt(v, 10), configType: kmsg.ConfigType(t)}
	}
	listener := fmt.Sprintf("PLAINTEXT://%s:%d", advertised.Host, advertised.Port)
	entries := []configEntry{
		{name: "auto.create.topics.enable", value: strconv.FormatBool(!cfg.DisableAutoCreateTopics), configType: kmsg.ConfigType(metadata.ConfigBoolean)},
		num("broker.id", int64(cfg.NodeID), metadata.ConfigInt),
		str("advertised.listeners", listener),
		num("default.replication.factor", 1, metadata.ConfigInt),
		str("listeners", "PLAINTEXT://"+cfg.Listen),
		str("log.dirs", cfg.DataDir),
		num("log.retention.check.interval.ms", cfg.RetentionCheckInterval.Milliseconds(), metadata.ConfigLong),
		num("node.id", int64(cfg.NodeID), metadata.ConfigInt),
		num("num.partitions", int64(cfg.DefaultPartitions), metadata.ConfigInt),
		num("socket.request.max.bytes", int64(cfg.SocketRequestMaxBytes), metadata.ConfigInt),
	}
	if cfg.Rack != "" {
		entries = append(entries, str("broker.rack", cfg.Rack))
	}
	for i := range entries {
		entries[i].source, entries[i].readOnly = kmsg.ConfigSourceStaticBrokerConfig, true
	}
	slices.SortFunc(entries, func(x, y configEntry) int { return compareStrings(x.name, y.name) })
	return entries
}

// isListConfig reports whether a topic config is a list (APPEND/SUBTRACT).
func isListConfig(name string) bool {
	d, ok := metadata.LookupTopicConfig(name)
	return ok && d.Type == metadata.ConfigList
}
