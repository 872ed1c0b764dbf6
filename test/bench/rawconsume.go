package bench

// The raw consume workload (`strata bench consume --client raw`): the
// topic's whole [start, end) range read with ReadRaw (rawfetch.go), so
// the number is what the broker serves, not what a consumer library can
// decode. See rawfetch.go for why.

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RunRawConsume reads every partition of cfg.Topic from its start offset to
// the end offset it had when the workload started, with raw Fetch requests
// (ReadRaw; cfg.Records, IdleTimeout and FetchMaxBytes are not used: the
// range is fixed up front and each Fetch asks for 1 MiB a partition, 50 MiB
// in all). Bytes counts record-batch bytes; EndToEnd stays empty (records
// are not decoded). A ctx ending first is its error.
func RunRawConsume(ctx context.Context, cfg ConsumeConfig) (ConsumeResult, error) {
	if err := cfg.Validate(); err != nil {
		return ConsumeResult{}, err
	}
	starts, ends, err := offsetRange(ctx, cfg.Brokers, cfg.Topic)
	if err != nil {
		return ConsumeResult{}, err
	}
	res := ConsumeResult{EndToEnd: NewHistogram()}
	for p, end := range ends {
		res.Wanted += max(0, end-starts[p])
	}
	raw, err := ReadRaw(ctx, cfg.Brokers, cfg.Topic, starts, ends, RawOptions{Logger: cfg.Logger})
	res.Records, res.Bytes, res.Elapsed = raw.Records, raw.Bytes, raw.Elapsed
	if err == nil && !raw.Complete {
		err = fmt.Errorf("bench: raw consume stopped: %w", context.Cause(ctx))
	}
	return res, err
}

// offsetRange lists every partition's start and end offsets, through a kgo
// client of its own (kgo finds each partition's leader).
func offsetRange(ctx context.Context, brokers []string, topic string) (starts, ends map[int32]int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, fmt.Errorf("bench: client: %w", err)
	}
	defer cl.Close()
	meta, err := rawMetadata(ctx, cl, topic, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	list := func(ts int64) (map[int32]int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := range meta.leaders {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		shards := cl.RequestSharded(ctx, req) // kgo splits by leader
		out := map[int32]int64{}
		for _, sh := range shards {
			if sh.Err != nil {
				return nil, fmt.Errorf("bench: list offsets: %w", sh.Err)
			}
			for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return nil, fmt.Errorf("bench: list offsets %s/%d: %w", topic, p.Partition, err)
					}
					out[p.Partition] = p.Offset
				}
			}
		}
		return out, nil
	}
	if starts, err = list(-2); err != nil {
		return nil, nil, err
	}
	ends, err = list(-1)
	return starts, ends, err
}
