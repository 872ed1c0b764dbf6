package metadata

// STUB: replaced by the metadata implementer. Topic configs use Kafka's names,
// types and defaults.

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
	SegmentBytes           int64
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
}

// TopicConfigDefs lists every supported topic config in name order.
func TopicConfigDefs() []ConfigDef { panic("unimplemented") }

// LookupTopicConfig finds a config by Kafka name.
func LookupTopicConfig(name string) (ConfigDef, bool) { panic("unimplemented") }

// ValidateTopicConfigs checks every override: known name, parses as its type,
// passes Validate; errors wrap ErrInvalidConfig and name the key.
func ValidateTopicConfigs(overrides map[string]string) error { panic("unimplemented") }

// ParseTopicConfig overlays overrides on the defaults.
func ParseTopicConfig(overrides map[string]string) (TopicConfig, error) { panic("unimplemented") }
