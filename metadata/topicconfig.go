package metadata

// Topic configs use Kafka's names, types, defaults and valid ranges (Kafka 4.x
// topic-level configs, LogConfig), so that kcat, kadm and the Kafka CLI see
// what they expect from DescribeConfigs. Strata differs from Kafka in three
// defaults: remote.storage.enable is true (the bucket is the system of record), and local.retention.ms/bytes keep a small hot tail (1 hour,
// 1 GiB) instead of -2.
//
// diskless.enable (KIP-1150's name) makes a topic diskless (package
// diskless): no local log, no replicas, and the bucket holds every batch.
// It is fixed at creation (ValidateTopicConfigChange), a diskless topic
// keeps remote.storage.enable=true (checkCrossRules), and it has no
// broker-wide default: a topic is diskless
// only when it says so.
//
// segment.bytes follows Kafka 4.0 (KIP-1030): minimum 1 MiB. Tests that need
// tiny segments set internal.segment.bytes (minimum 14 bytes, Kafka's old
// minimum), which Kafka 4.1 added for the same purpose; when set it overrides
// segment.bytes in TopicConfig.SegmentBytes. It is marked Internal so that
// DescribeConfigs can leave it out as Kafka does.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ConfigType is a Kafka config type as DescribeConfigs reports it.
type ConfigType int8

// Values match kmsg's ConfigType numbering (DescribeConfigs v3+).
const (
	ConfigBoolean  ConfigType = 1
	ConfigString   ConfigType = 2
	ConfigInt      ConfigType = 3
	ConfigShort    ConfigType = 4
	ConfigLong     ConfigType = 5
	ConfigDouble   ConfigType = 6
	ConfigList     ConfigType = 7
	ConfigClass    ConfigType = 8
	ConfigPassword ConfigType = 9
)

// ConfigDef describes one topic config.
type ConfigDef struct {
	Name    string
	Type    ConfigType
	Default string
	Doc     string
	// Validate checks a value (already known to parse as Type). nil: any value of the type.
	Validate func(value string) error
	// Internal configs are accepted but, as in Kafka, not listed by
	// DescribeConfigs unless explicitly set.
	Internal bool
	// ServerDefault is the broker-level config name Kafka reports as the
	// source of the default (e.g. log.retention.ms), empty if none.
	ServerDefault string
}

// TopicConfig is the effective, typed configuration of a topic (defaults
// overlaid with overrides). Durations in milliseconds as Kafka; -1 unlimited.
type TopicConfig struct {
	CleanupPolicy          string // "delete", "compact", "compact,delete"
	RetentionMs            int64
	RetentionBytes         int64
	LocalRetentionMs       int64 // -2: use RetentionMs
	LocalRetentionBytes    int64 // -2: use RetentionBytes
	RemoteStorageEnable    bool
	SegmentBytes           int64 // internal.segment.bytes if set, else segment.bytes
	SegmentMs              int64
	IndexIntervalBytes     int32
	MaxMessageBytes        int32
	MessageTimestampType   string // "CreateTime" or "LogAppendTime"
	MinInsyncReplicas      int32
	UncleanLeaderElection  bool
	DeleteRetentionMs      int64
	MinCleanableDirtyRatio float64
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64

	// Added beyond the contract's first version.
	CompressionType             string // "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"
	SegmentJitterMs             int64
	SegmentIndexBytes           int32
	FileDeleteDelayMs           int64
	FlushMessages               int64
	FlushMs                     int64
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	Preallocate                 bool
	RemoteLogCopyDisable        bool
	RemoteLogDeleteOnDisable    bool
	CompressionGzipLevel        int32
	CompressionLz4Level         int32
	CompressionZstdLevel        int32
	// TierUploadMaxLagMs (tier.upload.max.lag.ms) bounds how long a
	// committed record stays out of the bucket; 0 when the topic does not
	// set it (the broker's --tier-upload-max-lag applies), -1 no bound.
	TierUploadMaxLagMs int64
	// RetentionHoldMs and RetentionHoldBytes (retention.hold.ms,
	// retention.hold.bytes) bound how long past retention.ms, and how
	// many bytes past retention, remote retention keeps the objects a
	// consumer group still needs (tier/hold.go): -1 (the default) takes
	// the broker's --retention-hold / --retention-hold-bytes, 0 turns that
	// bound off, and the hold is off when both bounds are.
	RetentionHoldMs    int64
	RetentionHoldBytes int64
	// DisklessEnable (diskless.enable) marks a diskless topic: set at
	// creation only, never changed afterwards.
	DisklessEnable bool
}

// HasCompact reports whether the cleanup policy includes compaction.
func (c TopicConfig) HasCompact() bool { return strings.Contains(c.CleanupPolicy, "compact") }

// HasDelete reports whether the cleanup policy includes time/size deletion.
func (c TopicConfig) HasDelete() bool { return strings.Contains(c.CleanupPolicy, "delete") }

// EffectiveLocalRetentionMs resolves local.retention.ms's -2 ("same as
// retention.ms") and bounds it by retention.ms: the hot tail never keeps
// longer than the whole log (the default of 1 hour applies only where
// retention.ms allows it).
func (c TopicConfig) EffectiveLocalRetentionMs() int64 {
	return effectiveLocal(c.LocalRetentionMs, c.RetentionMs)
}

// EffectiveLocalRetentionBytes resolves local.retention.bytes's -2 and
// bounds it by retention.bytes.
func (c TopicConfig) EffectiveLocalRetentionBytes() int64 {
	return effectiveLocal(c.LocalRetentionBytes, c.RetentionBytes)
}

// effectiveLocal: -2 means total; -1 (unlimited) on either side yields
// the other; otherwise the smaller.
func effectiveLocal(local, total int64) int64 {
	switch {
	case local == -2, local == -1:
		return total
	case total == -1:
		return local
	}
	return min(local, total)
}

// Strata's local-retention defaults (README "Local retention"): the bucket
// is the system of record, so the hot tail is kept small. Kafka's default
// is -2 (keep everything locally for retention.ms/bytes).
const (
	DefaultLocalRetentionMs    = "3600000"    // 1 hour
	DefaultLocalRetentionBytes = "1073741824" // 1 GiB per partition, plus the active segment
)

// DefaultTierUploadMaxLagMs is tier.upload.max.lag.ms's default, the
// broker's --tier-upload-max-lag unless that is changed.
const DefaultTierUploadMaxLagMs = "60000"

// minTierUploadMaxLagMs keeps the bound above the uploader's own cadence
// (it checks every second and needs a round trip to the bucket and etcd).
const minTierUploadMaxLagMs = 1000

func validateUploadMaxLag(v string) error {
	n, _ := strconv.ParseInt(v, 10, 64)
	if n != -1 && n < minTierUploadMaxLagMs {
		return fmt.Errorf("value %d must be -1 (no bound) or at least %d", n, minTierUploadMaxLagMs)
	}
	return nil
}

const maxLong = "9223372036854775807"

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n < min {
			return fmt.Errorf("value %d must be at least %d", n, min)
		}
		return nil
	}
}

func between(min, max int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n < min || n > max {
			return fmt.Errorf("value %d must be in [%d, %d]", n, min, max)
		}
		return nil
	}
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("value %q must be one of %v", v, values)
		}
		return nil
	}
}

func validateCleanupPolicy(v string) error {
	items := splitList(v)
	if len(items) == 0 {
		return fmt.Errorf("cleanup.policy must list at least one of [compact, delete]")
	}
	for _, item := range items {
		if item != "compact" && item != "delete" {
			return fmt.Errorf("cleanup.policy value %q must be one of [compact, delete]", item)
		}
	}
	return nil
}

func validateRatio(v string) error {
	f, _ := strconv.ParseFloat(v, 64)
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("value %s must be in [0, 1]", v)
	}
	return nil
}

// validateThrottledReplicas accepts "", "*" or "partition:broker,..." as Kafka.
func validateThrottledReplicas(v string) error {
	if v == "" || strings.TrimSpace(v) == "*" {
		return nil
	}
	for _, item := range splitList(v) {
		p, b, ok := strings.Cut(item, ":")
		if !ok {
			return fmt.Errorf("%q must be partitionId:brokerId", item)
		}
		if _, err := strconv.ParseInt(p, 10, 32); err != nil {
			return fmt.Errorf("%q must be partitionId:brokerId", item)
		}
		if _, err := strconv.ParseInt(b, 10, 32); err != nil {
			return fmt.Errorf("%q must be partitionId:brokerId", item)
		}
	}
	return nil
}

// splitList splits a Kafka LIST value: comma separated, blanks trimmed,
// empty items dropped.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// topicConfigDefs is the table, in name order. Immutable after init of the
// package-level value (never written).
var topicConfigDefs = []ConfigDef{
	{Name: "cleanup.policy", Type: ConfigList, Default: "delete", ServerDefault: "log.cleanup.policy",
		Doc: "delete, compact, or both: what happens to old segments", Validate: validateCleanupPolicy},
	{Name: "compression.gzip.level", Type: ConfigInt, Default: "-1", ServerDefault: "compression.gzip.level",
		Doc: "gzip level when compression.type is gzip", Validate: func(v string) error {
			if v == "-1" {
				return nil
			}
			return between(1, 9)(v)
		}},
	{Name: "compression.lz4.level", Type: ConfigInt, Default: "9", ServerDefault: "compression.lz4.level",
		Doc: "lz4 level when compression.type is lz4", Validate: between(1, 17)},
	{Name: "compression.type", Type: ConfigString, Default: "producer", ServerDefault: "compression.type",
		Doc:      "final compression of the topic; producer keeps what the producer sent",
		Validate: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")},
	{Name: "compression.zstd.level", Type: ConfigInt, Default: "3", ServerDefault: "compression.zstd.level",
		Doc: "zstd level when compression.type is zstd", Validate: between(-131072, 22)},
	{Name: "delete.retention.ms", Type: ConfigLong, Default: "86400000", ServerDefault: "log.cleaner.delete.retention.ms",
		Doc: "how long tombstones are kept on compacted topics", Validate: atLeast(0)},
	{Name: "diskless.enable", Type: ConfigBoolean, Default: "false",
		Doc: "true: the topic has no local log, no replicas and no leader election; any broker accepts its writes " +
			"and serves its reads from shared objects in the bucket. Set only at creation; needs remote.storage.enable=true " +
			"and a cleanup.policy without compact"},
	{Name: "file.delete.delay.ms", Type: ConfigLong, Default: "60000", ServerDefault: "log.segment.delete.delay.ms",
		Doc: "delay before a deleted segment file is removed", Validate: atLeast(0)},
	{Name: "flush.messages", Type: ConfigLong, Default: maxLong, ServerDefault: "log.flush.interval.messages",
		Doc: "fsync every this many messages", Validate: atLeast(1)},
	{Name: "flush.ms", Type: ConfigLong, Default: maxLong, ServerDefault: "log.flush.interval.ms",
		Doc: "fsync at least this often", Validate: atLeast(0)},
	{Name: "follower.replication.throttled.replicas", Type: ConfigList, Default: "",
		ServerDefault: "follower.replication.throttled.replicas",
		Doc:           "replicas throttled on the follower side", Validate: validateThrottledReplicas},
	{Name: "index.interval.bytes", Type: ConfigInt, Default: "4096", ServerDefault: "log.index.interval.bytes",
		Doc: "bytes between offset index entries", Validate: atLeast(0)},
	{Name: "internal.segment.bytes", Type: ConfigInt, Default: "", Internal: true,
		Doc: "testing only: segment size below segment.bytes' 1 MiB minimum", Validate: atLeast(14)},
	{Name: "leader.replication.throttled.replicas", Type: ConfigList, Default: "",
		ServerDefault: "leader.replication.throttled.replicas",
		Doc:           "replicas throttled on the leader side", Validate: validateThrottledReplicas},
	{Name: "local.retention.bytes", Type: ConfigLong, Default: DefaultLocalRetentionBytes, ServerDefault: "log.local.retention.bytes",
		Doc: "bytes kept on local disk when tiered (capped by retention.bytes); -2: retention.bytes", Validate: atLeast(-2)},
	{Name: "local.retention.ms", Type: ConfigLong, Default: DefaultLocalRetentionMs, ServerDefault: "log.local.retention.ms",
		Doc: "time kept on local disk when tiered (capped by retention.ms); -2: retention.ms", Validate: atLeast(-2)},
	{Name: "max.compaction.lag.ms", Type: ConfigLong, Default: maxLong, ServerDefault: "log.cleaner.max.compaction.lag.ms",
		Doc: "longest time a record stays uncompacted", Validate: atLeast(1)},
	{Name: "max.message.bytes", Type: ConfigInt, Default: "1048588", ServerDefault: "message.max.bytes",
		Doc: "largest record batch the topic accepts", Validate: atLeast(0)},
	{Name: "message.timestamp.after.max.ms", Type: ConfigLong, Default: "3600000",
		ServerDefault: "log.message.timestamp.after.max.ms",
		Doc:           "how far a CreateTime may be ahead of the broker's clock", Validate: atLeast(0)},
	{Name: "message.timestamp.before.max.ms", Type: ConfigLong, Default: maxLong,
		ServerDefault: "log.message.timestamp.before.max.ms",
		Doc:           "how far a CreateTime may be behind the broker's clock", Validate: atLeast(0)},
	{Name: "message.timestamp.type", Type: ConfigString, Default: "CreateTime", ServerDefault: "log.message.timestamp.type",
		Doc: "CreateTime or LogAppendTime", Validate: oneOf("CreateTime", "LogAppendTime")},
	{Name: "min.cleanable.dirty.ratio", Type: ConfigDouble, Default: "0.5", ServerDefault: "log.cleaner.min.cleanable.ratio",
		Doc: "dirty share of the log that triggers cleaning", Validate: validateRatio},
	{Name: "min.compaction.lag.ms", Type: ConfigLong, Default: "0", ServerDefault: "log.cleaner.min.compaction.lag.ms",
		Doc: "shortest time a record stays uncompacted", Validate: atLeast(0)},
	{Name: "min.insync.replicas", Type: ConfigInt, Default: "1", ServerDefault: "min.insync.replicas",
		Doc: "ISR size acks=all needs", Validate: atLeast(1)},
	{Name: "preallocate", Type: ConfigBoolean, Default: "false", ServerDefault: "log.preallocate",
		Doc: "preallocate segment files"},
	{Name: "remote.log.copy.disable", Type: ConfigBoolean, Default: "false",
		Doc: "stop uploading new segments while keeping tiered ones"},
	{Name: "remote.log.delete.on.disable", Type: ConfigBoolean, Default: "false",
		Doc: "delete tiered data when remote storage is disabled"},
	{Name: "remote.storage.enable", Type: ConfigBoolean, Default: "true",
		Doc: "tier sealed segments to the object store (Strata default: true)"},
	{Name: "retention.bytes", Type: ConfigLong, Default: "-1", ServerDefault: "log.retention.bytes",
		Doc: "bytes kept per partition; -1 unlimited", Validate: atLeast(-1)},
	{Name: "retention.hold.bytes", Type: ConfigLong, Default: "-1", ServerDefault: "retention.hold.bytes",
		Doc:      "most bytes of objects past retention the bucket keeps per partition for consumer groups that still need them; 0: no byte bound; -1: the broker's --retention-hold-bytes",
		Validate: atLeast(-1)},
	{Name: "retention.hold.ms", Type: ConfigLong, Default: "-1", ServerDefault: "retention.hold.ms",
		Doc:      "how long past retention.ms the bucket keeps an object a consumer group still needs; 0: no time bound; -1: the broker's --retention-hold",
		Validate: atLeast(-1)},
	{Name: "retention.ms", Type: ConfigLong, Default: "604800000", ServerDefault: "log.retention.ms",
		Doc: "time kept; -1 unlimited", Validate: atLeast(-1)},
	{Name: "segment.bytes", Type: ConfigInt, Default: "1073741824", ServerDefault: "log.segment.bytes",
		Doc: "segment size; minimum 1 MiB as Kafka 4", Validate: atLeast(1 << 20)},
	{Name: "segment.index.bytes", Type: ConfigInt, Default: "10485760", ServerDefault: "log.index.size.max.bytes",
		Doc: "maximum offset index size", Validate: atLeast(4)},
	{Name: "segment.jitter.ms", Type: ConfigLong, Default: "0", ServerDefault: "log.roll.jitter.ms",
		Doc: "random jitter subtracted from segment.ms", Validate: atLeast(0)},
	{Name: "segment.ms", Type: ConfigLong, Default: "604800000", ServerDefault: "log.roll.ms",
		Doc: "segment age that forces a roll", Validate: atLeast(1)},
	{Name: "tier.upload.max.lag.ms", Type: ConfigLong, Default: DefaultTierUploadMaxLagMs, ServerDefault: "tier.upload.max.lag.ms",
		Doc:      "longest time a committed record stays out of the bucket (the bucket's recovery point); -1: only segment.bytes and segment.ms roll",
		Validate: validateUploadMaxLag},
	{Name: "unclean.leader.election.enable", Type: ConfigBoolean, Default: "false",
		ServerDefault: "unclean.leader.election.enable",
		Doc:           "allow a replica outside the ISR to become leader"},
}

// TopicConfigDefs lists every supported topic config in name order. The
// returned slice is a copy.
func TopicConfigDefs() []ConfigDef { return slices.Clone(topicConfigDefs) }

// ignoredTopicConfigs are topic configs that Kafka 4 accepts in
// CreateTopics and AlterConfigs and ignores (older tools still set them).
var ignoredTopicConfigs = map[string]bool{
	"message.format.version": true,
}

// IgnoredTopicConfig reports whether name is accepted with any value and
// then dropped: it is neither validated nor stored nor described.
func IgnoredTopicConfig(name string) bool { return ignoredTopicConfigs[name] }

// LookupTopicConfig finds a config by Kafka name.
func LookupTopicConfig(name string) (ConfigDef, bool) {
	i, found := slices.BinarySearchFunc(topicConfigDefs, name, func(d ConfigDef, n string) int {
		return strings.Compare(d.Name, n)
	})
	if !found {
		return ConfigDef{}, false
	}
	return topicConfigDefs[i], true
}

// parseTyped checks that value parses as t.
func parseTyped(t ConfigType, value string) error {
	var err error
	switch t {
	case ConfigBoolean:
		if v := strings.TrimSpace(value); !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			err = fmt.Errorf("%q is not true or false", value)
		}
	case ConfigInt:
		_, err = strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	case ConfigShort:
		_, err = strconv.ParseInt(strings.TrimSpace(value), 10, 16)
	case ConfigLong:
		_, err = strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	case ConfigDouble:
		var f float64
		f, err = strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			err = fmt.Errorf("%q is not a finite number", value)
		}
	}
	return err
}

// validateOne checks one override; the error wraps ErrInvalidConfig.
func validateOne(name, value string) error {
	def, ok := LookupTopicConfig(name)
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
	}
	if err := parseTyped(def.Type, value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
	}
	if def.Validate != nil {
		if err := def.Validate(strings.TrimSpace(value)); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
		}
	}
	return nil
}

// ValidateTopicConfigs checks every override: known name, parses as its type,
// passes Validate; then the cross-config rules (local retention within total
// retention). Errors wrap ErrInvalidConfig and name the key.
func ValidateTopicConfigs(overrides map[string]string) error {
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic: the first bad key in name order is reported
	for _, name := range names {
		if err := validateOne(name, overrides[name]); err != nil {
			return err
		}
	}
	_, err := ParseTopicConfig(overrides)
	return err
}

// ParseTopicConfig overlays overrides on the defaults and checks the result.
func ParseTopicConfig(overrides map[string]string) (TopicConfig, error) {
	for name, value := range overrides {
		if err := validateOne(name, value); err != nil {
			return TopicConfig{}, err
		}
	}
	p := configParser{overrides: overrides}
	c := p.build()
	if err := checkCrossRules(c, overrides); err != nil {
		return TopicConfig{}, err
	}
	return c, nil
}

// checkCrossRules enforces the rules that span configs: Kafka's
// LogConfig.validateValues for tiered topics on explicitly set local
// retentions (Strata's defaults are capped by the total retention instead,
// EffectiveLocalRetentionMs, so a small retention.ms alone stays valid),
// and the diskless rules (checkDiskless).
func checkCrossRules(c TopicConfig, overrides map[string]string) error {
	if err := checkDiskless(c); err != nil {
		return err
	}
	if _, set := overrides["local.retention.ms"]; !set {
		c.LocalRetentionMs = -2
	}
	if _, set := overrides["local.retention.bytes"]; !set {
		c.LocalRetentionBytes = -2
	}
	if c.LocalRetentionMs != -2 && c.RetentionMs != -1 &&
		(c.LocalRetentionMs == -1 || c.LocalRetentionMs > c.RetentionMs) {
		return fmt.Errorf("%w: local.retention.ms %d must not exceed retention.ms %d",
			ErrInvalidConfig, c.LocalRetentionMs, c.RetentionMs)
	}
	if c.LocalRetentionBytes != -2 && c.RetentionBytes != -1 &&
		(c.LocalRetentionBytes == -1 || c.LocalRetentionBytes > c.RetentionBytes) {
		return fmt.Errorf("%w: local.retention.bytes %d must not exceed retention.bytes %d",
			ErrInvalidConfig, c.LocalRetentionBytes, c.RetentionBytes)
	}
	return nil
}

// checkDiskless refuses the combinations a diskless topic cannot honour:
// remote.storage.enable=false (the bucket is where its batches live, so
// there is nothing to turn off). Everything else is accepted (a compacted
// diskless topic's merged objects are cleaned in the bucket);
// configs about local logs and replicas (local.retention.*,
// min.insync.replicas, segment.*) have no effect on a diskless topic.
func checkDiskless(c TopicConfig) error {
	if !c.DisklessEnable {
		return nil
	}
	if !c.RemoteStorageEnable {
		return fmt.Errorf("%w: diskless.enable=true needs remote.storage.enable=true: a diskless topic's data lives only in the bucket",
			ErrInvalidConfig)
	}
	return nil
}

// DisklessConfigs reports whether a topic's overrides make it diskless
// (diskless.enable=true; false when unset, as the default is). The
// overrides need not have been validated: anything but true is classic.
func DisklessConfigs(overrides map[string]string) bool {
	return strings.EqualFold(strings.TrimSpace(overrides["diskless.enable"]), "true")
}

// Diskless reports whether t is a diskless topic (DisklessConfigs of its
// overrides).
func (t Topic) Diskless() bool { return DisklessConfigs(t.Configs) }

// disklessFixedMessage is the reason a change of diskless.enable is refused.
const disklessFixedMessage = "diskless.enable cannot be changed after the topic is created"

// ValidateTopicConfigChange checks a topic's overrides after an
// alteration (AlterConfigs, IncrementalAlterConfigs): it must not change
// whether the topic is diskless, since a diskless topic's record has no
// replicas and a classic one's data is on its replicas' disks, neither of
// which an alteration can convert; and after must be valid on its own
// (ValidateTopicConfigs). Setting diskless.enable to the value it already
// has is no change. Errors wrap ErrInvalidConfig.
func ValidateTopicConfigChange(before, after map[string]string) error {
	if DisklessConfigs(before) != DisklessConfigs(after) {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, disklessFixedMessage)
	}
	return ValidateTopicConfigs(after)
}

// configParser reads validated values; every name it asks for is in the
// table, so parse errors cannot happen here.
type configParser struct{ overrides map[string]string }

func (p configParser) raw(name string) string {
	if v, ok := p.overrides[name]; ok {
		return strings.TrimSpace(v)
	}
	def, _ := LookupTopicConfig(name)
	return def.Default
}

func (p configParser) long(name string) int64 {
	n, _ := strconv.ParseInt(p.raw(name), 10, 64)
	return n
}

func (p configParser) int(name string) int32 { return int32(p.long(name)) }

func (p configParser) bool(name string) bool { return strings.EqualFold(p.raw(name), "true") }

func (p configParser) build() TopicConfig {
	ratio, _ := strconv.ParseFloat(p.raw("min.cleanable.dirty.ratio"), 64)
	c := TopicConfig{
		CleanupPolicy:               canonicalCleanupPolicy(p.raw("cleanup.policy")),
		RetentionMs:                 p.long("retention.ms"),
		RetentionBytes:              p.long("retention.bytes"),
		LocalRetentionMs:            p.long("local.retention.ms"),
		LocalRetentionBytes:         p.long("local.retention.bytes"),
		RemoteStorageEnable:         p.bool("remote.storage.enable"),
		SegmentBytes:                p.long("segment.bytes"),
		SegmentMs:                   p.long("segment.ms"),
		IndexIntervalBytes:          p.int("index.interval.bytes"),
		MaxMessageBytes:             p.int("max.message.bytes"),
		MessageTimestampType:        p.raw("message.timestamp.type"),
		MinInsyncReplicas:           p.int("min.insync.replicas"),
		UncleanLeaderElection:       p.bool("unclean.leader.election.enable"),
		DeleteRetentionMs:           p.long("delete.retention.ms"),
		MinCleanableDirtyRatio:      ratio,
		MinCompactionLagMs:          p.long("min.compaction.lag.ms"),
		MaxCompactionLagMs:          p.long("max.compaction.lag.ms"),
		CompressionType:             p.raw("compression.type"),
		SegmentJitterMs:             p.long("segment.jitter.ms"),
		SegmentIndexBytes:           p.int("segment.index.bytes"),
		FileDeleteDelayMs:           p.long("file.delete.delay.ms"),
		FlushMessages:               p.long("flush.messages"),
		FlushMs:                     p.long("flush.ms"),
		MessageTimestampBeforeMaxMs: p.long("message.timestamp.before.max.ms"),
		MessageTimestampAfterMaxMs:  p.long("message.timestamp.after.max.ms"),
		Preallocate:                 p.bool("preallocate"),
		RemoteLogCopyDisable:        p.bool("remote.log.copy.disable"),
		RemoteLogDeleteOnDisable:    p.bool("remote.log.delete.on.disable"),
		CompressionGzipLevel:        p.int("compression.gzip.level"),
		CompressionLz4Level:         p.int("compression.lz4.level"),
		CompressionZstdLevel:        p.int("compression.zstd.level"),
		RetentionHoldMs:             p.long("retention.hold.ms"),
		RetentionHoldBytes:          p.long("retention.hold.bytes"),
		DisklessEnable:              p.bool("diskless.enable"),
	}
	if _, ok := p.overrides["internal.segment.bytes"]; ok {
		c.SegmentBytes = p.long("internal.segment.bytes")
	}
	if _, ok := p.overrides["tier.upload.max.lag.ms"]; ok {
		c.TierUploadMaxLagMs = p.long("tier.upload.max.lag.ms")
	}
	return c
}

// canonicalCleanupPolicy orders the policy list so that callers compare
// against "delete", "compact" or "compact,delete" only.
func canonicalCleanupPolicy(v string) string {
	items := splitList(v)
	hasCompact, hasDelete := slices.Contains(items, "compact"), slices.Contains(items, "delete")
	switch {
	case hasCompact && hasDelete:
		return "compact,delete"
	case hasCompact:
		return "compact"
	default:
		return "delete"
	}
}
