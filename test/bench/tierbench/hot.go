package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/test/bench"
)

// hotConfig is one hot-tail run.
type hotConfig struct {
	brokers          []string
	httpAddr, topic  string
	rate             float64
	recordSize       int
	duration, warmup time.Duration
}

// hotResult: the tail consumer's end-to-end latency, counted from each
// record's intended send time (coordinated-omission corrected), for the
// records intended after the warm-up; ack is the producer's share of it
// (intended send time to acknowledgement), which tells a slow produce path
// from a slow fetch path.
type hotResult struct {
	latency, ack     *bench.Histogram
	produced, errors int64
}

func runHot(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hot", flag.ContinueOnError)
	var cfg hotConfig
	brokers := fs.String("brokers", "", "comma-separated brokers")
	fs.StringVar(&cfg.httpAddr, "http", "", "broker --http host:port (for the backfill's tiered range)")
	fs.StringVar(&cfg.topic, "topic", "", "topic")
	fs.Float64Var(&cfg.rate, "rate", 2000, "records/s offered by the paced producer")
	fs.IntVar(&cfg.recordSize, "record-size", 1024, "value bytes (>= 8: the intended send time)")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "producer run time")
	fs.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "leading part not recorded")
	label := fs.String("label", "", "name of the run in the summary line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.brokers = brokerList(*brokers)
	if cfg.recordSize < 8 || cfg.rate <= 0 || cfg.warmup >= cfg.duration {
		return fmt.Errorf("need record-size >= 8, rate > 0, warmup < duration")
	}
	res, err := hotRun(ctx, cfg)
	if err != nil {
		return err
	}
	h, a := res.latency, res.ack
	say("hot tail %s: %d produced, %d errors, %d measured; e2e %s; produce ack %s", *label, res.produced, res.errors, h.Count(), h, a)
	fmt.Printf("hot label=%s produced=%d errors=%d measured=%d p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f"+
		" ack_p50_ms=%.3f ack_p99_ms=%.3f ack_p999_ms=%.3f\n",
		*label, res.produced, res.errors, h.Count(), msq(h, 0.5), msq(h, 0.99), msq(h, 0.999), float64(h.Max())/1e6,
		msq(a, 0.5), msq(a, 0.99), msq(a, 0.999))
	return nil
}

func msq(h *bench.Histogram, q float64) float64 { return float64(h.Quantile(q)) / 1e6 }

// hotRun starts the tail consumer, then the paced producer; it waits for
// the produced records to arrive (at most 10 s).
func hotRun(ctx context.Context, cfg hotConfig) (hotResult, error) {
	tail, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.ConsumeTopics(cfg.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return hotResult{}, err
	}
	defer tail.Close()
	// Position the tail consumer at the end before anything is produced.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	tail.PollFetches(pctx)
	pcancel()

	res := hotResult{latency: bench.NewHistogram(), ack: bench.NewHistogram()}
	start := time.Now().Add(100 * time.Millisecond)
	measureFrom, measureTo := start.Add(cfg.warmup), start.Add(cfg.duration)
	var want atomic.Int64 // records intended in the measured window, acknowledged
	tailCtx, tailCancel := context.WithCancel(ctx)
	tailDone := make(chan struct{})
	go func() {
		defer close(tailDone)
		tailLoop(tailCtx, tail, res.latency, measureFrom, measureTo, &want)
	}()
	res.produced, res.errors = producePaced(ctx, cfg, start, measureFrom, measureTo, &want, res.ack)
	waitCount(&want, 10*time.Second, tailDone)
	tailCancel()
	<-tailDone
	return res, nil
}

// waitCount waits until the tail consumer has seen every measured record
// (want back to 0), at most limit. The histogram itself is read only after
// the tail goroutine ends.
func waitCount(want *atomic.Int64, limit time.Duration, tailDone <-chan struct{}) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if want.Load() <= 0 {
			return
		}
		select {
		case <-tailDone:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tailLoop records now - intended send time of every record intended in
// [from, to). want counts measured records not yet seen (the producer adds,
// this subtracts); the loop returns when ctx ends.
func tailLoop(ctx context.Context, cl *kgo.Client, h *bench.Histogram, from, to time.Time, want *atomic.Int64) {
	lo, hi := from.UnixNano(), to.UnixNano()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		now := time.Now().UnixNano()
		fetches.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < 8 {
				return
			}
			intended := int64(binary.BigEndian.Uint64(r.Value))
			if intended >= lo && intended < hi {
				h.Record(now - intended)
				want.Add(-1)
			}
		})
	}
}

// producePaced sends record i at start + i/rate (never earlier), carrying
// its intended send time, until to. Records intended in [from, to) and
// acknowledged are added to want, and their intended-send-to-ack latency
// to ack (read only after producePaced returns: Flush waited for every
// callback).
func producePaced(ctx context.Context, cfg hotConfig, start, from, to time.Time, want *atomic.Int64,
	ack *bench.Histogram) (produced, errs int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.DefaultProduceTopic(cfg.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return 0, 1
	}
	defer cl.Close()
	var nerr, nok atomic.Int64
	var ackMu sync.Mutex // guards ack: kgo may run callbacks of different partitions concurrently
	interval := time.Duration(float64(time.Second) / cfg.rate)
	for i := int64(0); ctx.Err() == nil; i++ {
		intended := start.Add(time.Duration(i) * interval)
		if !intended.Before(to) {
			break
		}
		if d := time.Until(intended); d > 0 {
			time.Sleep(d)
		}
		v := make([]byte, cfg.recordSize)
		binary.BigEndian.PutUint64(v, uint64(intended.UnixNano()))
		measured := !intended.Before(from)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				nerr.Add(1)
				return
			}
			nok.Add(1)
			if measured {
				want.Add(1)
				d := time.Since(intended)
				ackMu.Lock()
				ack.RecordDuration(d)
				ackMu.Unlock()
			}
		})
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = cl.Flush(fctx)
	return nok.Load(), nerr.Load()
}

// runBackfill is the cold backfill of the hot-tail comparison, in its own
// process so that its allocations and CPU do not share a Go runtime with
// the tail consumer: it reads [0, tiered end) of every partition over and
// over until --duration has passed (or SIGTERM).
func runBackfill(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backfill", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "comma-separated brokers")
	httpAddr := fs.String("http", "", "broker --http host:port")
	topic := fs.String("topic", "", "topic")
	duration := fs.Duration("duration", 30*time.Second, "run time")
	maxPart := fs.Int("fetch-max-partition-bytes", 0, "kgo FetchMaxPartitionBytes (0: kgo's default, 1 MiB)")
	rate := fs.Float64("max-mb-per-sec", 0, "client-side cap on value (kgo) or batch (raw) MB/s (0: flat out)")
	client := fs.String("client", "kgo", "kgo: a kgo consumer decoding every record; raw: raw Fetch requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	read, bytesName, err := coldClient(*client)
	if err != nil {
		return err
	}
	opts := coldOpts{maxPartBytes: int32(*maxPart), bytesPerSec: *rate * 1e6}
	ends, _, err := tieredEnds(ctx, *httpAddr, *topic)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	start := time.Now()
	var bytes int64
	passes := 0
	for ctx.Err() == nil {
		r, err := read(ctx, brokerList(*brokers), *topic, ends, opts)
		if err != nil {
			return err
		}
		bytes += r.valueBytes
		if r.complete {
			passes++
		}
	}
	elapsed := time.Since(start)
	say("backfill (%s client): %d complete passes, %d %s in %.1fs: %.1f MB/s", *client, passes, bytes, bytesName, elapsed.Seconds(), mbps(bytes, elapsed))
	fmt.Printf("backfill client=%s passes=%d %s=%d seconds=%.3f mb_per_sec=%.2f\n", *client, passes, bytesName, bytes, elapsed.Seconds(), mbps(bytes, elapsed))
	return nil
}
