package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/strata-log/strata/test/bench"
)

// BenchmarkReplication is the replication benchmark (numbers, not a test): on one
// 3-broker cluster (--durability replication, as Kafka), in the same run,
//
//   - throughput of acks=1 into RF=1 partitions (the baseline) and of
//     acks=all into RF=3, min.insync.replicas=2 partitions, flat out;
//   - produce-to-ack latency p50/p99 of both at a paced rate
//     (coordinated-omission corrected: from each record's intended send
//     time), so queueing of the flat-out run does not hide in it.
//
// It reports MB/s per workload, the ratio rf3/rf1, and latencies. Run:
//
//	go test -run '^$' -bench Replication -benchtime 1x ./test/cluster/
//
// Knobs: BENCH_RECORDS (200000), BENCH_RECORD_SIZE (1024),
// BENCH_PARTITIONS (6), BENCH_RATE (5000 records/s for the latency runs).
func BenchmarkReplication(b *testing.B) {
	records := envInt("BENCH_RECORDS", 200_000)
	size := envInt("BENCH_RECORD_SIZE", 1024)
	partitions := int32(envInt("BENCH_PARTITIONS", 6))
	rate := float64(envInt("BENCH_RATE", 5000))
	c := Start(b, Config{LogLevel: "warn"})
	c.CreateTopic("bench-rf1", partitions, 1, nil)
	c.CreateTopic("bench-rf3", partitions, 3, map[string]string{"min.insync.replicas": "2"})
	ctx := context.Background()
	run := func(topic, acks string, n int64, rate float64) bench.ProduceResult {
		res, err := bench.RunProduce(ctx, bench.ProduceConfig{
			Brokers: c.Addrs(), Topic: topic, Records: n, RecordSize: size, Partitions: partitions,
			Acks: acks, Rate: rate, Concurrency: 2,
		})
		if err != nil {
			b.Fatalf("%s acks=%s: %v", topic, acks, err)
		}
		if res.Errors > 0 {
			b.Fatalf("%s acks=%s: %d errors, first %v", topic, acks, res.Errors, res.FirstError)
		}
		return res
	}
	for range b.N {
		run("bench-rf1", "1", int64(records/10), 0) // warm-up: connections, page cache
		base := run("bench-rf1", "1", int64(records), 0)
		repl := run("bench-rf3", "all", int64(records), 0)
		paced := int64(rate * 10) // 10 s each
		baseLat := run("bench-rf1", "1", paced, rate)
		replLat := run("bench-rf3", "all", paced, rate)
		b.ReportMetric(base.MBPerSec(), "rf1-acks1-MB/s")
		b.ReportMetric(repl.MBPerSec(), "rf3-acksall-MB/s")
		b.ReportMetric(repl.MBPerSec()/base.MBPerSec(), "rf3/rf1")
		b.ReportMetric(msOf(replLat.Latency, 0.99), "rf3-p99-ms")
		b.Logf("\n%-34s %10s %10s %9s %9s\n%s\n%s\n%s\n%s\nratio acks=all RF=3 / acks=1 RF=1 throughput: %.2f",
			"workload", "records/s", "MB/s", "p50 ms", "p99 ms",
			row("flat out, acks=1 RF=1", base), row("flat out, acks=all RF=3 (min.isr 2)", repl),
			row(fmt.Sprintf("%.0f rec/s, acks=1 RF=1", rate), baseLat),
			row(fmt.Sprintf("%.0f rec/s, acks=all RF=3", rate), replLat),
			repl.MBPerSec()/base.MBPerSec())
	}
}

func row(name string, r bench.ProduceResult) string {
	return fmt.Sprintf("%-34s %10.0f %10.1f %9.2f %9.2f", name, r.RecordsPerSec(), r.MBPerSec(),
		msOf(r.Latency, 0.5), msOf(r.Latency, 0.99))
}

func msOf(h *bench.Histogram, q float64) float64 {
	return float64(h.Quantile(q)) / float64(time.Millisecond)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
