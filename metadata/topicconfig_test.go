package metadata

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestTopicConfigDefaults(t *testing.T) {
	c, err := ParseTopicConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := TopicConfig{
		CleanupPolicy: "delete", RetentionMs: 604800000, RetentionBytes: -1,
		LocalRetentionMs: 3600000, LocalRetentionBytes: 1073741824, RemoteStorageEnable: true,
		SegmentBytes: 1073741824, SegmentMs: 604800000, IndexIntervalBytes: 4096,
		MaxMessageBytes: 1048588, MessageTimestampType: "CreateTime", MinInsyncReplicas: 1,
		UncleanLeaderElection: false, DeleteRetentionMs: 86400000, MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs: 0, MaxCompactionLagMs: 9223372036854775807,
		CompressionType: "producer", SegmentJitterMs: 0, SegmentIndexBytes: 10485760,
		FileDeleteDelayMs: 60000, FlushMessages: 9223372036854775807, FlushMs: 9223372036854775807,
		MessageTimestampBeforeMaxMs: 9223372036854775807, MessageTimestampAfterMaxMs: 3600000,
		CompressionGzipLevel: -1, CompressionLz4Level: 9, CompressionZstdLevel: 3,
		RetentionHoldMs: -1, RetentionHoldBytes: -1, // unset: the broker's defaults
	}
	if c != want {
		t.Fatalf("defaults\n got %+v\nwant %+v", c, want)
	}
	if c.EffectiveLocalRetentionMs() != 3600000 || c.EffectiveLocalRetentionBytes() != 1073741824 {
		t.Fatalf("effective local retention %d %d", c.EffectiveLocalRetentionMs(), c.EffectiveLocalRetentionBytes())
	}
	// The lean defaults are capped by a smaller total retention, and a
	// small retention.ms alone is valid.
	small, err := ParseTopicConfig(map[string]string{"retention.ms": "1000", "retention.bytes": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if small.EffectiveLocalRetentionMs() != 1000 || small.EffectiveLocalRetentionBytes() != 5000 {
		t.Fatalf("capped local retention %d %d", small.EffectiveLocalRetentionMs(), small.EffectiveLocalRetentionBytes())
	}
	minus2, _ := ParseTopicConfig(map[string]string{"local.retention.ms": "-2", "local.retention.bytes": "-2"})
	if minus2.EffectiveLocalRetentionMs() != 604800000 || minus2.EffectiveLocalRetentionBytes() != -1 {
		t.Fatalf("-2 local retention %d %d", minus2.EffectiveLocalRetentionMs(), minus2.EffectiveLocalRetentionBytes())
	}
}

func TestTopicConfigDefsTable(t *testing.T) {
	defs := TopicConfigDefs()
	if !slices.IsSortedFunc(defs, func(a, b ConfigDef) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("defs not in name order: LookupTopicConfig's binary search needs it")
	}
	for _, def := range defs {
		got, ok := LookupTopicConfig(def.Name)
		if !ok || got.Name != def.Name {
			t.Errorf("lookup %q failed", def.Name)
		}
		if def.Internal {
			continue
		}
		// Every default must itself be valid.
		if err := validateOne(def.Name, def.Default); err != nil {
			t.Errorf("default of %s: %v", def.Name, err)
		}
	}
	if _, ok := LookupTopicConfig("no.such.config"); ok {
		t.Fatal("unknown config found")
	}
	defs[0].Name = "mutated" // the returned slice is a copy
	if TopicConfigDefs()[0].Name == "mutated" {
		t.Fatal("TopicConfigDefs exposes the table")
	}
}

func TestValidateTopicConfigs(t *testing.T) {
	cases := []struct {
		name      string
		overrides map[string]string
		ok        bool
	}{
		{"empty", nil, true},
		{"unknown key", map[string]string{"retention.msx": "1"}, false},
		{"long not a number", map[string]string{"retention.ms": "soon"}, false},
		{"retention unlimited", map[string]string{"retention.ms": "-1"}, true},
		{"retention below -1", map[string]string{"retention.ms": "-2"}, false},
		{"int overflow", map[string]string{"max.message.bytes": "3000000000"}, false},
		{"bool", map[string]string{"unclean.leader.election.enable": "TRUE"}, true},
		{"bool garbage", map[string]string{"preallocate": "yes"}, false},
		{"compact", map[string]string{"cleanup.policy": "compact"}, true},
		{"compact,delete", map[string]string{"cleanup.policy": "delete, compact"}, true},
		{"policy unknown value", map[string]string{"cleanup.policy": "compact,forever"}, false},
		{"policy empty", map[string]string{"cleanup.policy": ""}, false},
		{"timestamp type", map[string]string{"message.timestamp.type": "LogAppendTime"}, true},
		{"timestamp type bad", map[string]string{"message.timestamp.type": "logappendtime"}, false},
		{"segment.bytes below 1 MiB", map[string]string{"segment.bytes": "1048575"}, false},
		{"segment.bytes 1 MiB", map[string]string{"segment.bytes": "1048576"}, true},
		{"internal.segment.bytes small", map[string]string{"internal.segment.bytes": "1024"}, true},
		{"internal.segment.bytes too small", map[string]string{"internal.segment.bytes": "13"}, false},
		{"min.insync.replicas 0", map[string]string{"min.insync.replicas": "0"}, false},
		{"ratio", map[string]string{"min.cleanable.dirty.ratio": "0.9"}, true},
		{"ratio above 1", map[string]string{"min.cleanable.dirty.ratio": "1.5"}, false},
		{"ratio NaN", map[string]string{"min.cleanable.dirty.ratio": "NaN"}, false},
		{"compression", map[string]string{"compression.type": "zstd"}, true},
		{"compression bad", map[string]string{"compression.type": "brotli"}, false},
		{"gzip level", map[string]string{"compression.gzip.level": "0"}, false},
		{"throttled replicas", map[string]string{"leader.replication.throttled.replicas": "0:1,1:2"}, true},
		{"throttled replicas bad", map[string]string{"leader.replication.throttled.replicas": "0-1"}, false},
		{"local within total", map[string]string{"retention.ms": "1000", "local.retention.ms": "500"}, true},
		{"local above total", map[string]string{"retention.ms": "1000", "local.retention.ms": "2000"}, false},
		{"local unlimited, total bounded", map[string]string{"retention.bytes": "1000", "local.retention.bytes": "-1"}, false},
		{"local bounded, total unlimited", map[string]string{"local.retention.bytes": "1000"}, true},
		{"local -2", map[string]string{"retention.ms": "1000", "local.retention.ms": "-2"}, true},
		{"local below -2", map[string]string{"local.retention.ms": "-3"}, false},
		{"hold off", map[string]string{"retention.hold.ms": "0", "retention.hold.bytes": "0"}, true},
		{"hold broker default", map[string]string{"retention.hold.ms": "-1", "retention.hold.bytes": "-1"}, true},
		{"hold ms below -1", map[string]string{"retention.hold.ms": "-2"}, false},
		{"hold bytes below -1", map[string]string{"retention.hold.bytes": "-2"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateTopicConfigs(c.overrides)
			if c.ok && err != nil {
				t.Fatalf("want valid: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("want ErrInvalidConfig, got %v", err)
			}
			_, perr := ParseTopicConfig(c.overrides)
			if (perr == nil) != (err == nil) {
				t.Fatalf("Parse and Validate disagree: %v vs %v", perr, err)
			}
		})
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	err := ValidateTopicConfigs(map[string]string{"segment.ms": "0"})
	if err == nil || !strings.Contains(err.Error(), "segment.ms") {
		t.Fatalf("error %v does not name the key", err)
	}
}

func TestParseTopicConfigOverrides(t *testing.T) {
	c, err := ParseTopicConfig(map[string]string{
		"cleanup.policy":         "delete,compact",
		"retention.ms":           "1000",
		"local.retention.ms":     "100",
		"segment.bytes":          "2097152",
		"internal.segment.bytes": "512",
		"message.timestamp.type": "LogAppendTime",
		"remote.storage.enable":  "false",
		"min.insync.replicas":    " 2 ",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.CleanupPolicy != "compact,delete" || !c.HasCompact() || !c.HasDelete() {
		t.Errorf("cleanup policy %q", c.CleanupPolicy)
	}
	if c.RetentionMs != 1000 || c.LocalRetentionMs != 100 || c.EffectiveLocalRetentionMs() != 100 {
		t.Errorf("retention %d local %d", c.RetentionMs, c.LocalRetentionMs)
	}
	if c.SegmentBytes != 512 {
		t.Errorf("segment bytes %d, want internal.segment.bytes 512", c.SegmentBytes)
	}
	if c.MessageTimestampType != "LogAppendTime" || c.RemoteStorageEnable || c.MinInsyncReplicas != 2 {
		t.Errorf("parsed %+v", c)
	}
	if c, _ := ParseTopicConfig(map[string]string{"retention.hold.ms": "3600000", "retention.hold.bytes": "0"}); c.RetentionHoldMs != 3600000 ||
		c.RetentionHoldBytes != 0 {
		t.Errorf("retention hold %d ms %d bytes, want 3600000 and 0", c.RetentionHoldMs, c.RetentionHoldBytes)
	}
	if c, _ := ParseTopicConfig(map[string]string{"cleanup.policy": "compact"}); c.HasDelete() || !c.HasCompact() {
		t.Errorf("compact only: %+v", c)
	}
}
