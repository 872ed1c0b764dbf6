package tier

import (
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
)

// TestRetentionDoomed: the rule classic and diskless remote retention
// share, over three objects of 100 bytes: [0, 9] newest record at 1000 ms,
// [10, 19] at 2000, [20, 29] at 3000.
func TestRetentionDoomed(t *testing.T) {
	entries := []metadata.TierEntry{
		{BaseOffset: 0, LastOffset: 9, MaxTimestamp: 1000, Size: 100},
		{BaseOffset: 10, LastOffset: 19, MaxTimestamp: 2000, Size: 100},
		{BaseOffset: 20, LastOffset: 29, MaxTimestamp: 3000, Size: 100},
	}
	now := time.UnixMilli(10_000)
	for _, tc := range []struct {
		name       string
		configs    map[string]string
		logStart   int64
		bytesAbove int64
		want       int
	}{
		{"no limits", map[string]string{"retention.ms": "-1"}, 0, 0, 0},
		{"below the log start", map[string]string{"retention.ms": "-1"}, 20, 0, 2},
		{"a log start inside an object keeps it", map[string]string{"retention.ms": "-1"}, 15, 0, 1},
		{"compact only keeps all but below the start", map[string]string{"cleanup.policy": "compact", "retention.ms": "1"}, 10, 0, 1},
		{"by time", map[string]string{"retention.ms": "7500"}, 0, 0, 2},
		{"by time, all", map[string]string{"retention.ms": "1"}, 0, 0, 3},
		{"by bytes, the entries alone", map[string]string{"retention.ms": "-1", "retention.bytes": "200"}, 0, 0, 1},
		{"by bytes, with the bytes above", map[string]string{"retention.ms": "-1", "retention.bytes": "150"}, 0, 50, 2},
		{"by bytes, under the limit", map[string]string{"retention.ms": "-1", "retention.bytes": "350"}, 0, 50, 0},
		{"bytes above alone exceed it", map[string]string{"retention.ms": "-1", "retention.bytes": "1"}, 0, 500, 3},
		{"time, then bytes over the rest", map[string]string{"retention.ms": "8500", "retention.bytes": "100"}, 0, 0, 2},
	} {
		cfg, err := metadata.ParseTopicConfig(tc.configs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := RetentionDoomed(entries, tc.logStart, cfg, tc.bytesAbove, now); got != tc.want {
			t.Errorf("%s: %d doomed, want %d", tc.name, got, tc.want)
		}
	}
}
