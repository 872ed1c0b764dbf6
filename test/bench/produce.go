package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInvalidConfig is returned for workload settings that cannot run.
var ErrInvalidConfig = errors.New("bench: invalid config")

// ProduceConfig describes one produce workload.
type ProduceConfig struct {
	// Brokers to bootstrap from. Default 127.0.0.1:9092.
	Brokers []string
	// Topic to produce to; created with Partitions partitions if missing.
	Topic string
	// Records to produce in total (> 0).
	Records int64
	// RecordSize is the value size in bytes (keys are nil). Default 1024.
	RecordSize int
	// Partitions for the topic if the workload creates it. Default 1.
	Partitions int32
	// Acks: "all" (default), "1" or "0". Idempotent writes are on for
	// "all" (kgo's default) and off otherwise, as Kafka requires.
	Acks string
	// Compression codec: none (default), gzip, snappy, lz4, zstd.
	Compression string
	// Concurrency is the number of producer clients, each with its own
	// connections, sharing Records and Rate evenly. Default 1.
	Concurrency int
	// Linger is kgo's ProducerLinger. Default 0 (kgo's default).
	Linger time.Duration
	// Rate is the target records/s over all clients; 0 runs flat out.
	// With a rate, latency is measured from each record's intended send
	// time (coordinated-omission correction, see the package doc).
	Rate float64
	// MaxBufferedRecords per client (kgo). Default 10,000.
	MaxBufferedRecords int
	// ClientOpts are added to every client the workload opens (TLS, SASL).
	ClientOpts []kgo.Opt
	// Progress, if set, counts acknowledged records and bytes as they come.
	Progress *Progress
	Logger   *slog.Logger
}

// Validate fills defaults and rejects impossible settings.
func (c *ProduceConfig) Validate() error {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{"127.0.0.1:9092"}
	}
	c.RecordSize = defaultInt(c.RecordSize, 1024)
	c.Concurrency = defaultInt(c.Concurrency, 1)
	c.MaxBufferedRecords = defaultInt(c.MaxBufferedRecords, 10_000)
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Acks == "" {
		c.Acks = "all"
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Topic == "":
		return fmt.Errorf("%w: topic is required", ErrInvalidConfig)
	case c.Records <= 0:
		return fmt.Errorf("%w: records must be > 0", ErrInvalidConfig)
	case c.RecordSize < 0 || c.Concurrency < 0 || c.Partitions < 0 || c.Rate < 0 || c.Linger < 0:
		return fmt.Errorf("%w: negative size, concurrency, partitions, rate or linger", ErrInvalidConfig)
	}
	if _, err := parseAcks(c.Acks); err != nil {
		return err
	}
	_, err := parseCompression(c.Compression)
	return err
}

func defaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func parseAcks(s string) (kgo.Acks, error) {
	switch s {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("%w: acks %q (want all, 1 or 0)", ErrInvalidConfig, s)
}

func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%w: compression %q (want none, gzip, snappy, lz4, zstd)", ErrInvalidConfig, s)
}

// ProduceResult is what a produce workload measured.
type ProduceResult struct {
	Records int64 // acknowledged without error
	Errors  int64 // records whose promise returned an error
	Bytes   int64 // value bytes acknowledged
	Elapsed time.Duration
	// Latency is produce-to-ack per record, in nanoseconds (from the
	// intended send time when a Rate was set). With acks=0 kgo completes a
	// promise once the request is written, so it measures only the client.
	Latency *Histogram
	// FirstError is the first produce error seen, if any.
	FirstError error
}

// RecordsPerSec and MBPerSec are the throughput of acknowledged records.
func (r ProduceResult) RecordsPerSec() float64 { return perSecond(float64(r.Records), r.Elapsed) }
func (r ProduceResult) MBPerSec() float64      { return perSecond(float64(r.Bytes)/1e6, r.Elapsed) }

func perSecond(v float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return v / d.Seconds()
}

// Summary is one key=value line that scripts parse (test/bench/run.sh).
func (r ProduceResult) Summary() string {
	return fmt.Sprintf("produce records=%d errors=%d bytes=%d seconds=%.3f records_per_sec=%.0f mb_per_sec=%.2f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f",
		r.Records, r.Errors, r.Bytes, r.Elapsed.Seconds(), r.RecordsPerSec(), r.MBPerSec(),
		ms(r.Latency.Quantile(0.5)), ms(r.Latency.Quantile(0.99)), ms(r.Latency.Quantile(0.999)), ms(r.Latency.Max()))
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// RunProduce creates the topic if needed, then produces cfg.Records records
// and waits for every acknowledgement.
func RunProduce(ctx context.Context, cfg ProduceConfig) (ProduceResult, error) {
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(cfg.Records)
	}
	if err := cfg.Validate(); err != nil {
		return ProduceResult{}, err
	}
	if err := ensureTopic(ctx, cfg.Brokers, cfg.ClientOpts, cfg.Topic, cfg.Partitions); err != nil {
		return ProduceResult{}, err
	}
	payload := randomPayload(cfg.RecordSize)
	workers := make([]*produceWorker, cfg.Concurrency)
	for i := range workers {
		w, err := newProduceWorker(cfg, i, payload)
		if err != nil {
			closeWorkers(workers[:i])
			return ProduceResult{}, err
		}
		workers[i] = w
	}
	defer closeWorkers(workers)

	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, start) }()
	}
	wg.Wait()
	return mergeWorkers(workers, time.Since(start)), ctx.Err()
}

// ensureTopic creates topic unless it exists.
func ensureTopic(ctx context.Context, brokers []string, clientOpts []kgo.Opt, topic string, partitions int32) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, clientOpts...)...)
	if err != nil {
		return fmt.Errorf("bench: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	return nil
}

// randomPayload returns size incompressible bytes plus slack so that
// records can take different windows of it without copying.
func randomPayload(size int) []byte {
	rng := rand.New(rand.NewPCG(42, uint64(size)))
	b := make([]byte, size+4096)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// produceWorker is one producer client. Its counters are written by kgo's
// promise goroutines, hence the atomics and the mutex around the histogram.
type produceWorker struct {
	client   *kgo.Client
	records  int64
	interval time.Duration // 0: flat out
	size     int
	payload  []byte
	progress *Progress // may be nil

	acked, failed, bytes atomic.Int64
	mu                   struct {
		sync.Mutex
		latency  *Histogram
		firstErr error
	}
}

func newProduceWorker(cfg ProduceConfig, index int, payload []byte) (*produceWorker, error) {
	acks, _ := parseAcks(cfg.Acks)
	codec, _ := parseCompression(cfg.Compression)
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.ProducerLinger(cfg.Linger),
	}
	if cfg.Acks != "all" && cfg.Acks != "-1" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("bench: client: %w", err)
	}
	w := &produceWorker{client: cl, size: cfg.RecordSize, payload: payload, progress: cfg.Progress}
	w.records = cfg.Records / int64(cfg.Concurrency)
	if int64(index) < cfg.Records%int64(cfg.Concurrency) {
		w.records++
	}
	if cfg.Rate > 0 {
		w.interval = time.Duration(float64(time.Second) * float64(cfg.Concurrency) / cfg.Rate)
	}
	w.mu.latency = NewHistogram()
	return w, nil
}

// run produces the worker's records and flushes. The send time of record i
// is start + i·interval when paced, so latency includes any time the
// producer fell behind schedule.
func (w *produceWorker) run(ctx context.Context, start time.Time) {
	for i := int64(0); i < w.records && ctx.Err() == nil; i++ {
		sent := time.Now()
		if w.interval > 0 {
			sent = start.Add(time.Duration(i) * w.interval)
			if d := time.Until(sent); d > 0 {
				time.Sleep(d)
			}
		}
		off := int(i*31) % 4096
		rec := &kgo.Record{Value: w.payload[off : off+w.size]}
		w.client.Produce(ctx, rec, func(r *kgo.Record, err error) { w.done(r, err, sent) })
	}
	_ = w.client.Flush(ctx) // errors surface through the promises
}

func (w *produceWorker) done(r *kgo.Record, err error, sent time.Time) {
	latency := time.Since(sent)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failed.Add(1)
		if w.mu.firstErr == nil {
			w.mu.firstErr = err
		}
		return
	}
	w.acked.Add(1)
	w.bytes.Add(int64(len(r.Value)))
	w.progress.add(1, int64(len(r.Value)))
	w.mu.latency.RecordDuration(latency)
}

func closeWorkers(workers []*produceWorker) {
	for _, w := range workers {
		if w != nil {
			w.client.Close()
		}
	}
}

func mergeWorkers(workers []*produceWorker, elapsed time.Duration) ProduceResult {
	res := ProduceResult{Elapsed: elapsed, Latency: NewHistogram()}
	for _, w := range workers {
		w.mu.Lock()
		res.Latency.Merge(w.mu.latency)
		if res.FirstError == nil {
			res.FirstError = w.mu.firstErr
		}
		w.mu.Unlock()
		res.Records += w.acked.Load()
		res.Errors += w.failed.Load()
		res.Bytes += w.bytes.Load()
	}
	return res
}
