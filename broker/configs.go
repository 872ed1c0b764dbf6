package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// levels are a dynamic broker config's synonyms, highest first.
	levels []configLevel
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

// brokerConfig is one broker config DescribeConfigs lists: its Kafka name,
// type and documentation, and how to read its value from the Config (after
// defaults).
type brokerConfig struct {
	name  string
	typ   metadata.ConfigType
	doc   string
	value func(c *Config, advertised metadata.BrokerInfo) string
}

// boundListeners is Kafka's listeners value: NAME://host:port of each
// named listener, or the one PLAINTEXT listener on Listen.
func boundListeners(c *Config, _ metadata.BrokerInfo) string {
	if len(c.Listeners) == 0 {
		return "PLAINTEXT://" + c.Listen
	}
	var out []string
	for _, l := range c.Listeners {
		out = append(out, l.Name+"://"+l.Addr)
	}
	return strings.Join(out, ",")
}

// advertisedListeners is Kafka's advertised.listeners value: each named
// listener's registered endpoint, in the listeners' order.
func advertisedListeners(c *Config, a metadata.BrokerInfo) string {
	if len(c.Listeners) == 0 || len(a.Endpoints) == 0 {
		return fmt.Sprintf("PLAINTEXT://%s:%d", a.Host, a.Port)
	}
	var out []string
	for _, l := range c.Listeners {
		out = append(out, l.Name+"://"+a.Endpoint(l.Name))
	}
	return strings.Join(out, ",")
}

func msOf(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// brokerConfigs are the broker configs Strata has, under their Kafka names,
// in name order, with their static values (strata serve flags); the ones in
// dynamicBrokerConfigs may also be set at run time.
var brokerConfigs = []brokerConfig{
	{"advertised.listeners", metadata.ConfigString, "Listener address given to clients in Metadata.",
		advertisedListeners},
	{"allow.everyone.if.no.acl.found", metadata.ConfigBoolean, "With the authorizer on, a resource that no ACL matches is open to everyone.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.FormatBool(c.AllowEveryoneIfNoACL) }},
	{"auto.create.topics.enable", metadata.ConfigBoolean, "Create a topic when a client's Metadata request names one that does not exist.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.FormatBool(!c.DisableAutoCreateTopics) }},
	{"broker.id", metadata.ConfigInt, "This broker's id (the same as node.id).",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(int(c.NodeID)) }},
	{"controlled.shutdown.timeout.ms", metadata.ConfigLong, "How long a shutdown waits for the controller to move this broker's leaderships away.",
		func(c *Config, _ metadata.BrokerInfo) string { return msOf(c.ControlledShutdownTimeout) }},
	{"default.replication.factor", metadata.ConfigInt, "Replication factor of automatically created topics.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(int(c.DefaultReplicationFactor)) }},
	{"follower.replication.throttled.rate", metadata.ConfigLong, "Bytes per second replicas being added by reassignments may copy (0: unlimited; Strata applies the lower of this and leader.replication.throttled.rate on the leader).",
		func(c *Config, _ metadata.BrokerInfo) string {
			return strconv.FormatInt(c.ReassignmentBytesPerSecond, 10)
		}},
	{"leader.imbalance.check.interval.seconds", metadata.ConfigLong, "How often the controller moves leadership back to preferred replicas (negative: never).",
		func(c *Config, _ metadata.BrokerInfo) string {
			return strconv.FormatInt(int64(c.LeaderRebalanceInterval/time.Second), 10)
		}},
	{"leader.replication.throttled.rate", metadata.ConfigLong, "Bytes per second a leader serves to replicas being added by reassignments (0: unlimited; the lower of this and follower.replication.throttled.rate applies).",
		func(c *Config, _ metadata.BrokerInfo) string {
			return strconv.FormatInt(c.ReassignmentBytesPerSecond, 10)
		}},
	{"listeners", metadata.ConfigString, "Address the Kafka listener binds.",
		boundListeners},
	{"log.cleaner.backoff.ms", metadata.ConfigLong, "How long the log cleaner sleeps when there is no log to clean.",
		func(c *Config, _ metadata.BrokerInfo) string { return msOf(c.Cleaner.Backoff) }},
	{"log.cleaner.dedupe.buffer.size", metadata.ConfigLong, "Memory for the log cleaner's key offset map.",
		func(c *Config, _ metadata.BrokerInfo) string {
			return strconv.FormatInt(c.Cleaner.DedupeBufferBytes, 10)
		}},
	{"log.cleaner.enable", metadata.ConfigBoolean, "Run the log cleaner for topics with cleanup.policy=compact.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.FormatBool(!c.Cleaner.Disable) }},
	{"log.cleaner.io.max.bytes.per.second", metadata.ConfigDouble, "Bytes per second the log cleaner may read and write (0: unlimited).",
		func(c *Config, _ metadata.BrokerInfo) string {
			return strconv.FormatInt(c.Cleaner.IOBytesPerSecond, 10)
		}},
	{"log.dirs", metadata.ConfigString, "Directory of this broker's local logs.",
		func(c *Config, _ metadata.BrokerInfo) string { return c.DataDir }},
	{"log.retention.check.interval.ms", metadata.ConfigLong, "How often retention deletes eligible segments.",
		func(c *Config, _ metadata.BrokerInfo) string { return msOf(c.RetentionCheckInterval) }},
	{"max.incremental.fetch.session.cache.slots", metadata.ConfigInt, "Incremental fetch sessions kept (0: none).",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(max(c.FetchSessionCacheSlots, 0)) }},
	{"max.connections", metadata.ConfigInt, "Open client connections of the broker (0: unlimited).",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(c.MaxConnections) }},
	{"max.connections.per.ip", metadata.ConfigInt, "Open connections from one IP address (0: unlimited).",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(c.MaxConnectionsPerIP) }},
	{"node.id", metadata.ConfigInt, "This broker's id.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(int(c.NodeID)) }},
	{"num.partitions", metadata.ConfigInt, "Partition count of automatically created topics and of CreateTopics without one.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(int(c.DefaultPartitions)) }},
	{"offsets.topic.replication.factor", metadata.ConfigShort, "Replication factor of the internal offsets and transaction topics.",
		func(c *Config, _ metadata.BrokerInfo) string {
			return strconv.Itoa(int(c.OffsetsTopicReplicationFactor))
		}},
	{"queued.max.request.bytes", metadata.ConfigLong, "Bytes of requests read and not yet handled, across connections (0 or negative: unlimited).",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.FormatInt(c.QueuedMaxRequestBytes, 10) }},
	{"replica.fetch.wait.max.ms", metadata.ConfigInt, "How long a follower's fetch waits at the leader for new data.",
		func(c *Config, _ metadata.BrokerInfo) string { return msOf(c.ReplicaFetchMaxWait) }},
	{"replica.lag.time.max.ms", metadata.ConfigLong, "How long a follower may lag before it leaves the ISR.",
		func(c *Config, _ metadata.BrokerInfo) string { return msOf(c.ReplicaLagTimeMax) }},
	{"socket.request.max.bytes", metadata.ConfigInt, "Largest request the broker reads.",
		func(c *Config, _ metadata.BrokerInfo) string { return strconv.Itoa(int(c.SocketRequestMaxBytes)) }},
	{"super.users", metadata.ConfigList, "Principals allowed everything when the authorizer is on.",
		func(c *Config, _ metadata.BrokerInfo) string { return strings.Join(c.SuperUsers, ";") }},
}

// brokerConfigEntries lists this broker's configs, each with its
// documentation: the dynamic ones (dynamic_configs.go) with the value in
// force, its source and its levels; the others static and read-only.
func (b *Broker) brokerConfigEntries() []configEntry {
	entries := make([]configEntry, 0, len(brokerConfigs)+1)
	for _, bc := range brokerConfigs {
		v := b.brokerConfigInForce(bc.name)
		_, dynamic := dynamicBrokerConfigs[bc.name]
		entries = append(entries, configEntry{name: bc.name, value: v.value, source: v.source, readOnly: !dynamic,
			configType: kmsg.ConfigType(bc.typ), doc: bc.doc, levels: v.levels})
	}
	if b.cfg.Rack != "" {
		entries = append(entries, configEntry{name: "broker.rack", value: b.cfg.Rack, configType: kmsg.ConfigType(metadata.ConfigString),
			doc: "Rack of this broker, for rack-aware replica placement.", source: kmsg.ConfigSourceStaticBrokerConfig, readOnly: true})
	}
	slices.SortFunc(entries, func(x, y configEntry) int { return compareStrings(x.name, y.name) })
	return entries
}

// clusterDefaultConfigEntries lists the cluster-wide dynamic configs set,
// as Kafka describes the default broker resource ("").
func (b *Broker) clusterDefaultConfigEntries() []configEntry {
	entries := []configEntry{}
	for name, value := range b.dynamic.loaded().Default {
		doc := ""
		for _, bc := range brokerConfigs {
			if bc.name == name {
				doc = bc.doc
			}
		}
		l := configLevel{value, kmsg.ConfigSourceDynamicDefaultBrokerConfig}
		entries = append(entries, configEntry{name: name, value: value, source: l.source, doc: doc,
			configType: kmsg.ConfigType(metadata.ConfigLong), levels: []configLevel{l}})
	}
	slices.SortFunc(entries, func(x, y configEntry) int { return compareStrings(x.name, y.name) })
	return entries
}

// isListConfig reports whether a topic config is a list (APPEND/SUBTRACT).
func isListConfig(name string) bool {
	d, ok := metadata.LookupTopicConfig(name)
	return ok && d.Type == metadata.ConfigList
}
