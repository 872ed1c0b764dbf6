package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/strata-log/strata/test/bench"
)

// runBench wires flags to the test/bench workloads and prints their report:
// a human-readable block, then one key=value line for scripts.
func runBench(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "bench", map[string]verb{
		"produce": {benchProduce, "measure producing to a broker"},
		"consume": {benchConsume, "measure consuming from a broker"},
	}, args)
}

// clientCPU is the CPU time this process used (user + system), as a
// key=value for the summary line: on a small machine the load generator's
// CPU is taken from the broker it measures, and the suite reports both.
func clientCPU() string {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return "client_cpu_s=-"
	}
	secs := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	return fmt.Sprintf("client_cpu_s=%.2f", secs)
}

func benchLogger(c *cli) *slog.Logger {
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func benchProduce(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("bench produce", c)
	conn := newConnFlags(fs, c)
	cfg := bench.ProduceConfig{Logger: benchLogger(c)}
	var partitions int
	fs.StringVar(&cfg.Topic, "topic", "strata-bench", "topic (created if missing)")
	fs.Int64Var(&cfg.Records, "records", 1_000_000, "records to produce")
	fs.IntVar(&cfg.RecordSize, "record-size", 1024, "value size in `bytes`")
	fs.IntVar(&partitions, "partitions", 1, "partitions when creating the topic")
	fs.StringVar(&cfg.Acks, "acks", "all", "all, 1 or 0")
	fs.StringVar(&cfg.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&cfg.Concurrency, "concurrency", 1, "producer clients sharing the records")
	fs.DurationVar(&cfg.Linger, "linger", 0, "producer linger (kgo ProducerLinger)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "target records/s in total; latency then counts from each record's intended send time\n"+
		"(coordinated-omission correction). 0: as fast as possible")
	fs.IntVar(&cfg.MaxBufferedRecords, "max-buffered-records", 10_000, "records a client buffers before Produce blocks")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	connCfg, err := conn.resolve()
	if err != nil {
		return err
	}
	cfg.Brokers, cfg.ClientOpts, cfg.Progress = connCfg.seeds, connCfg.opts, new(bench.Progress)
	cfg.Partitions = int32(partitions)
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	stop := newProgressLine(c.stderr).watch(cfg.Progress.Read)
	res, err := bench.RunProduce(ctx, cfg)
	stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "produced %d records (%d errors) of %d B to %s in %.2fs: %.0f records/s, %.2f MB/s\n",
		res.Records, res.Errors, cfg.RecordSize, cfg.Topic, res.Elapsed.Seconds(), res.RecordsPerSec(), res.MBPerSec())
	fmt.Fprintf(c.stdout, "produce latency (acks=%s): %s\n", cfg.Acks, res.Latency)
	fmt.Fprintln(c.stdout, res.Summary(), clientCPU())
	if res.Errors > 0 {
		return fmt.Errorf("%d records failed, first: %w", res.Errors, res.FirstError)
	}
	return nil
}

func benchConsume(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("bench consume", c)
	conn := newConnFlags(fs, c)
	cfg := bench.ConsumeConfig{Logger: benchLogger(c)}
	var fetchMax int
	fs.StringVar(&cfg.Topic, "topic", "strata-bench", "topic to read from the start")
	fs.Int64Var(&cfg.Records, "records", 0, "records to read (0: those in the topic when the bench starts)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "stop when nothing arrives for this long (default 10s)")
	fs.IntVar(&fetchMax, "fetch-max-bytes", 0, "kgo FetchMaxBytes (0: kgo's default)")
	client := fs.String("client", "kgo", "kgo (a franz-go consumer, decoding every record) or raw (Fetch requests to the\n"+
		"leaders, batches CRC-checked but not decoded: what the broker serves; MB/s counts batch bytes)")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	connCfg, err := conn.resolve()
	if err != nil {
		return err
	}
	cfg.Brokers, cfg.ClientOpts, cfg.Progress = connCfg.seeds, connCfg.opts, new(bench.Progress)
	cfg.FetchMaxBytes = int32(fetchMax)
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	run := bench.RunConsume
	switch *client {
	case "kgo":
	case "raw":
		if connCfg.secure {
			return usageErrorf("--client raw speaks plaintext only: use --client kgo with TLS or SASL")
		}
		run = bench.RunRawConsume
	default:
		return usageErrorf("--client %q: want kgo or raw", *client)
	}
	stop := newProgressLine(c.stderr).watch(cfg.Progress.Read)
	res, err := run(ctx, cfg)
	stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "consumed %d records from %s in %.2fs: %.0f records/s, %.2f MB/s\n",
		res.Records, cfg.Topic, res.Elapsed.Seconds(), res.RecordsPerSec(), res.MBPerSec())
	fmt.Fprintf(c.stdout, "record age at receipt (end-to-end latency when a producer runs alongside): %s\n", res.EndToEnd)
	fmt.Fprintln(c.stdout, res.Summary(), clientCPU())
	if res.Records < res.Wanted {
		return fmt.Errorf("read %d of %d records before going idle", res.Records, res.Wanted)
	}
	return nil
}

func parseBenchFlags(fs *flag.FlagSet, args []string) error {
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("unexpected arguments %q", rest)
	}
	return nil
}
