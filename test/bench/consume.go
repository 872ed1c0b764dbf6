package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeConfig describes one consume workload: a direct (group-less)
// consumer reading every partition of Topic from the start.
type ConsumeConfig struct {
	// Brokers to bootstrap from. Default 127.0.0.1:9092.
	Brokers []string
	Topic   string
	// Records to read before stopping. 0: the records present when the
	// workload starts (end offsets minus start offsets, all partitions).
	Records int64
	// IdleTimeout stops the workload when no record arrived for this long.
	// Default 10s.
	IdleTimeout time.Duration
	// FetchMaxBytes is kgo's FetchMaxBytes. Default 50 MiB (kgo's default).
	FetchMaxBytes int32
	// ClientOpts are added to the consumer's client (TLS, SASL).
	ClientOpts []kgo.Opt
	// Progress, if set, counts records and bytes as they are read.
	Progress *Progress
	Logger   *slog.Logger
}

// Validate fills defaults and rejects impossible settings.
func (c *ConsumeConfig) Validate() error {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{"127.0.0.1:9092"}
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Topic == "":
		return fmt.Errorf("%w: topic is required", ErrInvalidConfig)
	case c.Records < 0 || c.IdleTimeout < 0 || c.FetchMaxBytes < 0:
		return fmt.Errorf("%w: negative records, idle timeout or fetch size", ErrInvalidConfig)
	}
	return nil
}

// ConsumeResult is what a consume workload measured.
type ConsumeResult struct {
	// Wanted is the number of records the workload set out to read.
	Wanted  int64
	Records int64
	Bytes   int64 // value bytes
	Elapsed time.Duration
	// EndToEnd is now minus each record's timestamp (the producer's
	// CreateTime), in nanoseconds. It means end-to-end latency only while
	// a producer runs alongside; for a backlog it is the data's age.
	EndToEnd *Histogram
	// FetchRequests and FetchRequestBytes count the Fetch requests the
	// consumer wrote and their bytes on the wire (incremental fetch
	// sessions shrink them).
	FetchRequests, FetchRequestBytes int64
}

func (r ConsumeResult) RecordsPerSec() float64 { return perSecond(float64(r.Records), r.Elapsed) }
func (r ConsumeResult) MBPerSec() float64      { return perSecond(float64(r.Bytes)/1e6, r.Elapsed) }

// Summary is one key=value line that scripts parse (test/bench/run.sh).
func (r ConsumeResult) Summary() string {
	return fmt.Sprintf("consume records=%d bytes=%d seconds=%.3f records_per_sec=%.0f mb_per_sec=%.2f e2e_p50_ms=%.3f e2e_p99_ms=%.3f e2e_p999_ms=%.3f fetch_requests=%d fetch_request_bytes=%d",
		r.Records, r.Bytes, r.Elapsed.Seconds(), r.RecordsPerSec(), r.MBPerSec(),
		ms(r.EndToEnd.Quantile(0.5)), ms(r.EndToEnd.Quantile(0.99)), ms(r.EndToEnd.Quantile(0.999)),
		r.FetchRequests, r.FetchRequestBytes)
}

// RunConsume reads until cfg.Records records arrived, the topic went idle
// for cfg.IdleTimeout, or ctx ended. Elapsed runs from the first poll to
// the last record, so the idle wait is not counted.
func RunConsume(ctx context.Context, cfg ConsumeConfig) (ConsumeResult, error) {
	if err := cfg.Validate(); err != nil {
		return ConsumeResult{}, err
	}
	var fetches fetchCounter
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithHooks(&fetches),
	}
	if cfg.FetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(cfg.FetchMaxBytes))
	}
	cl, err := kgo.NewClient(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: client: %w", err)
	}
	defer cl.Close()
	if cfg.Records == 0 {
		if cfg.Records, err = backlog(ctx, cl, cfg.Topic); err != nil {
			return ConsumeResult{}, err
		}
	}
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(cfg.Records)
	}
	res := consumeLoop(ctx, cl, cfg)
	res.FetchRequests, res.FetchRequestBytes = fetches.requests.Load(), fetches.bytes.Load()
	return res, nil
}

// fetchCounter is a kgo hook counting the Fetch requests written.
type fetchCounter struct{ requests, bytes atomic.Int64 }

var _ kgo.HookBrokerWrite = (*fetchCounter)(nil)

func (f *fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, written int, _, _ time.Duration, err error) {
	if key == 1 && err == nil { // Fetch
		f.requests.Add(1)
		f.bytes.Add(int64(written))
	}
}

// backlog counts the records currently in topic.
func backlog(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("bench: start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("bench: end offsets of %s: %w", topic, err)
	}
	var n int64
	ends.Each(func(end kadm.ListedOffset) {
		if start, ok := starts.Lookup(end.Topic, end.Partition); ok {
			n += end.Offset - start.Offset
		}
	})
	return n, nil
}

func consumeLoop(ctx context.Context, cl *kgo.Client, cfg ConsumeConfig) ConsumeResult {
	res := ConsumeResult{Wanted: cfg.Records, EndToEnd: NewHistogram()}
	start, last := time.Now(), time.Now()
	for res.Records < cfg.Records {
		pollCtx, cancel := context.WithDeadline(ctx, last.Add(cfg.IdleTimeout))
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if pollCtx.Err() != nil && fetches.NumRecords() == 0 {
			cfg.Logger.Warn("consume stopped before reading every record",
				"topic", cfg.Topic, "want", cfg.Records, "got", res.Records, "reason", pollCtx.Err())
			break
		}
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			res.Records++
			res.Bytes += int64(len(r.Value))
			res.EndToEnd.RecordDuration(now.Sub(r.Timestamp))
			cfg.Progress.add(1, int64(len(r.Value)))
		})
		fetches.EachError(func(t string, p int32, err error) {
			cfg.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
		})
		last = now
	}
	res.Elapsed = last.Sub(start)
	return res
}
