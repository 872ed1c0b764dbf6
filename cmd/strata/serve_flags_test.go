package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier"
)

func parseServeForTest(t *testing.T, args []string, env map[string]string) (serveConfig, error) {
	t.Helper()
	return parseServe(args, func(k string) string { return env[k] }, newFlagSetTo("serve", io.Discard))
}

func TestServeDefaults(t *testing.T) {
	cfg, err := parseServeForTest(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDir, _ := filepath.Abs("./strata-data")
	b := cfg.broker
	if b.NodeID != 1 || b.Listen != "127.0.0.1:9092" || b.Advertise != "" || b.DataDir != wantDir ||
		b.Durability != hotlog.DurabilityFsync || b.DisableAutoCreateTopics || b.DefaultPartitions != 1 ||
		b.RetentionCheckInterval != 30*time.Second || b.Rack != "" || b.FlushInterval != broker.DefaultFlushInterval {
		t.Errorf("broker config = %+v", b)
	}
	if len(cfg.etcdEndpoints) != 0 || cfg.embedded.Dir != filepath.Join(wantDir, "etcd") {
		t.Errorf("want embedded etcd in %s/etcd, got endpoints %v dir %s", wantDir, cfg.etcdEndpoints, cfg.embedded.Dir)
	}
	if cfg.metadata.Cluster != "strata" || cfg.http != "127.0.0.1:9644" {
		t.Errorf("cluster %q http %q", cfg.metadata.Cluster, cfg.http)
	}
	if cfg.objectStore != (objectStoreURL{Scheme: "file", Path: filepath.Join(wantDir, "objects")}) {
		t.Errorf("object store = %+v", cfg.objectStore)
	}
}

func TestServeEnvOverridesDefaultAndFlagOverridesEnv(t *testing.T) {
	env := map[string]string{
		"STRATA_NODE_ID":            "7",
		"STRATA_DATA_DIR":           "/tmp/from-env",
		"STRATA_DURABILITY":         "replication",
		"STRATA_ETCD":               "10.0.0.1:2379, 10.0.0.2:2379",
		"STRATA_AUTO_CREATE_TOPICS": "false",
		"STRATA_NUM_PARTITIONS":     "3",
		"STRATA_CLUSTER":            "envcluster",
	}
	cfg, err := parseServeForTest(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.broker
	if b.NodeID != 7 || b.DataDir != "/tmp/from-env" || b.Durability != hotlog.DurabilityReplication ||
		!b.DisableAutoCreateTopics || b.DefaultPartitions != 3 || cfg.metadata.Cluster != "envcluster" {
		t.Errorf("env not applied: %+v cluster %q", b, cfg.metadata.Cluster)
	}
	if got := strings.Join(cfg.etcdEndpoints, ","); got != "10.0.0.1:2379,10.0.0.2:2379" {
		t.Errorf("etcd endpoints = %q", got)
	}
	if cfg.objectStore.Path != "/tmp/from-env/objects" {
		t.Errorf("default object store follows the data dir: got %+v", cfg.objectStore)
	}

	cfg, err = parseServeForTest(t, []string{"--node-id", "9", "--data-dir=/tmp/from-flag", "--durability", "fsync",
		"--auto-create-topics=true", "--flush-interval", "0"}, env)
	if err != nil {
		t.Fatal(err)
	}
	b = cfg.broker
	if b.NodeID != 9 || b.DataDir != "/tmp/from-flag" || b.Durability != hotlog.DurabilityFsync || b.DisableAutoCreateTopics ||
		b.FlushInterval != 0 {
		t.Errorf("flags must win over env: %+v", b)
	}
	if b.DefaultPartitions != 3 {
		t.Errorf("env still applies where no flag is given: partitions %d", b.DefaultPartitions)
	}
}

func TestServeRejectsBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad durability flag", []string{"--durability", "sometimes"}, nil, "--durability"},
		{"bad durability env", nil, map[string]string{"STRATA_DURABILITY": "none"}, "--durability"},
		{"negative flush interval", []string{"--flush-interval", "-1ms"}, nil, "--flush-interval"},
		{"object store scheme", []string{"--object-store", "gs://bucket"}, nil, "--object-store"},
		{"object store relative file", []string{"--object-store", "file://relative/dir"}, nil, "--object-store"},
		{"object store file with no path", []string{"--object-store", "file://"}, nil, "--object-store"},
		{"s3 without bucket", []string{"--object-store", "s3:///prefix"}, nil, "--object-store"},
		{"s3 bad endpoint", []string{"--object-store", "s3://b/p?endpoint=minio:9000"}, nil, "--object-store"},
		{"s3 unknown parameter", []string{"--object-store", "s3://b/p?regoin=x"}, nil, "--object-store"},
		{"s3 credentials in url", []string{"--object-store", "s3://key:secret@b/p"}, nil, "--object-store"},
		{"bad node id env", nil, map[string]string{"STRATA_NODE_ID": "one"}, "STRATA_NODE_ID"},
		{"negative node id", []string{"--node-id", "-1"}, nil, "--node-id"},
		{"listen without port", []string{"--listen", "localhost"}, nil, "--listen"},
		{"advertise port 0", []string{"--advertise", "example.com:0"}, nil, "--advertise"},
		{"advertise-http port 0", []string{"--advertise-http", "example.com:0"}, nil, "--advertise-http"},
		{"advertise-http without host", []string{"--advertise-http", ":9644"}, nil, "--advertise-http"},
		{"advertise-http without port", []string{"--advertise-http", "example.com"}, nil, "--advertise-http"},
		{"zero partitions", []string{"--num-partitions", "0"}, nil, "--num-partitions"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "--log-level"},
		{"bad cluster", []string{"--cluster", "a/b"}, nil, "--cluster"},
		{"transaction version 3", []string{"--transaction-version", "3"}, nil, "--transaction-version"},
		{"zero producer id expiration", []string{"--producer-id-expiration", "0s"}, nil, "--producer-id-expiration"},
		{"tiny dedupe buffer", []string{"--log-cleaner-dedupe-buffer-size", "10"}, nil, "--log-cleaner-dedupe-buffer-size"},
		{"bad log format", []string{"--log-format", "yaml"}, nil, "--log-format"},
		{"zero auto-balance interval", []string{"--auto-balance", "--auto-balance-interval", "0s"}, nil, "--auto-balance-interval"},
		{"zero auto-balance moves", []string{"--auto-balance-max-moves", "0"}, nil, "--auto-balance-max-moves"},
		{"unknown flag", []string{"--no-such-flag"}, nil, "no-such-flag"},
		{"positional", []string{"extra"}, nil, "unexpected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseServeForTest(t, tc.args, tc.env)
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestServeAcceptsObjectStores(t *testing.T) {
	cases := map[string]objectStoreURL{
		"file:///var/lib/strata/objects/": {Scheme: "file", Path: "/var/lib/strata/objects"},
		"s3://bucket/some/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1": {
			Scheme: "s3", Bucket: "bucket", Prefix: "some/prefix", Endpoint: "http://127.0.0.1:9000", Region: "us-east-1"},
		"s3://bucket": {Scheme: "s3", Bucket: "bucket"},
	}
	for raw, want := range cases {
		cfg, err := parseServeForTest(t, []string{"--object-store", raw}, nil)
		if err != nil || cfg.objectStore != want {
			t.Errorf("%s: got %+v, %v; want %+v", raw, cfg.objectStore, err, want)
		}
	}
}

func TestEnvNames(t *testing.T) {
	for flagName, want := range map[string]string{
		"data-dir": "STRATA_DATA_DIR", "node-id": "STRATA_NODE_ID", "http": "STRATA_HTTP",
		"log-retention-check-interval": "STRATA_LOG_RETENTION_CHECK_INTERVAL",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("envName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

func TestParseArgsInterspersed(t *testing.T) {
	fs := newFlagSetTo("t", io.Discard)
	n := fs.Int("partitions", 1, "")
	var configs stringList
	fs.Var(&configs, "config", "")
	pos, err := parseArgs(fs, []string{"orders", "--partitions", "3", "audit", "--config", "a=1", "--config=b=2", "--", "--odd"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pos, " ") != "orders audit --odd" || *n != 3 || strings.Join(configs, " ") != "a=1 b=2" {
		t.Fatalf("positional %q partitions %d configs %q", pos, *n, configs)
	}
}

func TestCommandsExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, 0, "strata "},
		{[]string{"group", "frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{[]string{"group", "reset", "g", "--to-earliest", "--to-latest"}, 2, "exactly one of"},
		{[]string{"group", "reset", "g", "--to-datetime", "yesterday"}, 2, "RFC 3339"},
		{[]string{"serve", "--offsets-topic-num-partitions", "0"}, 2, "--offsets-topic-num-partitions"},
		{[]string{"tier", "frobnicate"}, 2, "strata tier status"},
		{[]string{"serve", "--tier-upload-max-lag-bytes", "0"}, 2, "--tier-upload-max-lag-bytes"},
		{[]string{"serve", "--tier-upload-max-lag", "500ms"}, 2, "--tier-upload-max-lag 500ms"},
		{[]string{"serve", "--tier-merge-interval", "0s"}, 2, "--tier-merge-interval"},
		{[]string{"tier", "status", "extra"}, 2, "unexpected arguments"},
		{[]string{"replay"}, 2, "are required"},
		{[]string{"restore"}, 2, "--object-store is required"},
		{[]string{"restore", "--object-store", "file:///x", "--as-of", "yesterday"}, 2, "RFC 3339"},
		{[]string{"restore", "--object-store", "file:///x", "--replication-factor", "0"}, 2, "--replication-factor"},
		{[]string{"nonsense"}, 2, "unknown command"},
		{[]string{}, 2, "usage"},
		{[]string{"topic", "frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{[]string{"topic"}, 2, "want a subcommand"},
		{[]string{"bench", "produce", "--acks", "2"}, 2, "acks"},
		{[]string{"serve", "--durability", "maybe"}, 2, "--durability"},
		{[]string{"produce"}, 2, "--topic"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if code := run(context.Background(), c, tc.args); code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%v: exit %d output %q; want exit %d containing %q", tc.args, code, out.String(), tc.code, tc.out)
		}
	}
}

func TestServeColdReaderFlags(t *testing.T) {
	cfg, err := parseServeForTest(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := tier.ColdConfig{CacheBytes: tier.DefaultColdCacheBytes, FetchSize: tier.DefaultColdFetchSize,
		Workers: tier.DefaultColdWorkers, ReadAhead: tier.DefaultColdReadAhead,
		Governor: tier.GovernorConfig{Target: tier.DefaultGovernorTarget}}
	if cfg.broker.Cold != want {
		t.Errorf("default cold config = %+v, want %+v", cfg.broker.Cold, want)
	}
	env := map[string]string{
		"STRATA_COLD_CACHE_BYTES":      "33554432",
		"STRATA_COLD_FETCH_SIZE":       "1048576",
		"STRATA_COLD_WORKERS":          "2",
		"STRATA_COLD_READ_AHEAD":       "5",
		"STRATA_COLD_BYTES_PER_SECOND": "1000000",
	}
	if cfg, err = parseServeForTest(t, nil, env); err != nil {
		t.Fatal(err)
	}
	want = tier.ColdConfig{CacheBytes: 32 << 20, FetchSize: 1 << 20, Workers: 2, ReadAhead: 5, BytesPerSecond: 1e6,
		Governor: tier.GovernorConfig{Target: tier.DefaultGovernorTarget}}
	if cfg.broker.Cold != want {
		t.Errorf("env cold config = %+v, want %+v", cfg.broker.Cold, want)
	}
	args := []string{"--cold-workers", "4", "--cold-read-ahead", "0", "--cold-bytes-per-second=0", "--cold-governor-target=0"}
	if cfg, err = parseServeForTest(t, args, env); err != nil {
		t.Fatal(err)
	}
	// --cold-read-ahead 0 turns read-ahead off: ReadAhead -1 (0 would mean
	// the default); so does --cold-governor-target 0 the governor.
	want = tier.ColdConfig{CacheBytes: 32 << 20, FetchSize: 1 << 20, Workers: 4, ReadAhead: -1,
		Governor: tier.GovernorConfig{Target: -1}}
	if cfg.broker.Cold != want {
		t.Errorf("flags over env: cold config = %+v, want %+v", cfg.broker.Cold, want)
	}
}

func TestServeRejectsBadColdReaderFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"cache below two fetches", []string{"--cold-cache-bytes", "1048576", "--cold-fetch-size", "1048576"}, nil, "CacheBytes"},
		{"fetch below a chunk", []string{"--cold-fetch-size", "4096"}, nil, "FetchSize"},
		{"zero cache", []string{"--cold-cache-bytes", "0"}, nil, "--cold-cache-bytes"},
		{"zero fetch size", []string{"--cold-fetch-size", "0"}, nil, "--cold-fetch-size"},
		{"zero workers", []string{"--cold-workers", "0"}, nil, "--cold-workers"},
		{"negative read-ahead", []string{"--cold-read-ahead", "-1"}, nil, "--cold-read-ahead"},
		{"negative governor target", []string{"--cold-governor-target", "-0.1"}, nil, "--cold-governor-target"},
		{"negative quota env", nil, map[string]string{"STRATA_COLD_BYTES_PER_SECOND": "-5"}, "--cold-bytes-per-second"},
		{"non-numeric env", nil, map[string]string{"STRATA_COLD_CACHE_BYTES": "1GiB"}, "STRATA_COLD_CACHE_BYTES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseServeForTest(t, tc.args, tc.env)
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error mentioning %q", err, tc.want)
			}
		})
	}
}

// --auto-balance is off unless set; its interval and bound apply only then.
func TestServeAutoBalanceFlags(t *testing.T) {
	cfg, err := parseServeForTest(t, []string{"--auto-balance-interval", "1m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.broker; b.AutoBalanceInterval != 0 || b.AutoBalanceMaxMoves != 0 {
		t.Errorf("without --auto-balance: interval %v, max moves %d; want it off", b.AutoBalanceInterval, b.AutoBalanceMaxMoves)
	}
	if cfg, err = parseServeForTest(t, nil, map[string]string{"STRATA_AUTO_BALANCE": "true"}); err != nil {
		t.Fatal(err)
	}
	if b := cfg.broker; b.AutoBalanceInterval != 5*time.Minute || b.AutoBalanceMaxMoves != 10 {
		t.Errorf("--auto-balance defaults: interval %v, max moves %d; want 5m and 10", b.AutoBalanceInterval, b.AutoBalanceMaxMoves)
	}
	args := []string{"--auto-balance", "--auto-balance-interval", "30s", "--auto-balance-max-moves", "3"}
	if cfg, err = parseServeForTest(t, args, nil); err != nil {
		t.Fatal(err)
	}
	if b := cfg.broker; b.AutoBalanceInterval != 30*time.Second || b.AutoBalanceMaxMoves != 3 {
		t.Errorf("%v: interval %v, max moves %d", args, b.AutoBalanceInterval, b.AutoBalanceMaxMoves)
	}
}

func TestServeTxnFlags(t *testing.T) {
	cfg, err := parseServeForTest(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.broker
	if b.TransactionVersion != 2 || b.ProducerIDExpiration != 24*time.Hour || b.Txn.Expiration != 7*24*time.Hour ||
		b.Txn.MaxTimeout != 15*time.Minute {
		t.Errorf("defaults: transaction version %d, producer id expiration %v, transactional id expiration %v, max timeout %v",
			b.TransactionVersion, b.ProducerIDExpiration, b.Txn.Expiration, b.Txn.MaxTimeout)
	}
	args := []string{"--transaction-version", "1", "--producer-id-expiration", "1h", "--transactional-id-expiration", "2h",
		"--transaction-max-timeout", "1m"}
	env := map[string]string{"STRATA_PRODUCER_ID_EXPIRATION": "5h"}
	if cfg, err = parseServeForTest(t, args, env); err != nil {
		t.Fatal(err)
	}
	b = cfg.broker
	if b.TransactionVersion != 1 || b.ProducerIDExpiration != time.Hour || b.Txn.Expiration != 2*time.Hour ||
		b.Txn.MaxTimeout != time.Minute {
		t.Errorf("flags: transaction version %d, producer id expiration %v, transactional id expiration %v, max timeout %v",
			b.TransactionVersion, b.ProducerIDExpiration, b.Txn.Expiration, b.Txn.MaxTimeout)
	}
}

func TestServeLogFormat(t *testing.T) {
	for _, tc := range []struct {
		args []string
		json bool
	}{{nil, false}, {[]string{"--log-format", "json"}, true}, {[]string{"--log-format=text"}, false}} {
		cfg, err := parseServeForTest(t, tc.args, nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		newServeLogger(&buf, cfg).Info("hello", "k", 1)
		var obj map[string]any
		isJSON := json.Unmarshal([]byte(buf.String()), &obj) == nil && obj["msg"] == "hello"
		if isJSON != tc.json || (!tc.json && !strings.Contains(buf.String(), "msg=hello k=1")) {
			t.Errorf("%v: logged %q, want json %v", tc.args, buf.String(), tc.json)
		}
	}
}

func TestServeRetentionHoldFlags(t *testing.T) {
	cfg, err := parseServeForTest(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.broker.Tier.RetentionHold != 0 || cfg.broker.Tier.RetentionHoldBytes != 0 {
		t.Errorf("default hold %v %d B, want off", cfg.broker.Tier.RetentionHold, cfg.broker.Tier.RetentionHoldBytes)
	}
	env := map[string]string{"STRATA_RETENTION_HOLD": "1h"}
	if cfg, err = parseServeForTest(t, []string{"--retention-hold-bytes", "1048576"}, env); err != nil {
		t.Fatal(err)
	}
	if cfg.broker.Tier.RetentionHold != time.Hour || cfg.broker.Tier.RetentionHoldBytes != 1<<20 {
		t.Errorf("hold %v %d B, want 1h and 1 MiB", cfg.broker.Tier.RetentionHold, cfg.broker.Tier.RetentionHoldBytes)
	}
	for _, args := range [][]string{{"--retention-hold", "-1s"}, {"--retention-hold-bytes", "-1"}} {
		if _, err := parseServeForTest(t, args, nil); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err = %v, want a usage error naming the flag", args, err)
		}
	}
}

// TestHTTPAdvertisement: peers get --advertise-http, else the --http host
// with the bound port; an every-interface host is left for the broker to
// replace with its advertised Kafka host.
func TestHTTPAdvertisement(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 41234}
	for _, c := range []struct{ advertise, http, want string }{
		{"b1.example:9644", "0.0.0.0:9644", "b1.example:9644"},
		{"", "10.0.0.1:0", "10.0.0.1:41234"},
		{"", "b1.example:9644", "b1.example:41234"},
		{"", "0.0.0.0:9644", ":41234"},
		{"", "[::]:9644", ":41234"},
		{"", ":9644", ":41234"},
	} {
		if got := httpAdvertisement(c.advertise, c.http, bound); got != c.want {
			t.Errorf("httpAdvertisement(%q, %q) = %q, want %q", c.advertise, c.http, got, c.want)
		}
	}
}
