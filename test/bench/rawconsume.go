package bench

// The raw consume workload: what the broker can serve, without a consumer
// library's CPU in the way.
//
// A kgo consumer decodes every record (varints, a *kgo.Record each); on a
// 2-core machine that client takes the CPU the broker needs, so a kgo
// consume measures the client. The raw workload sends kmsg Fetch requests
// straight to each partition's leader (kgo.Broker.Request: no record
// decoding) and only walks the returned batches: framing, offsets and the
// CRC-32C, so a broker serving garbage cannot look fast. One Fetch is in
// flight per leader, as with kgo's consumer. Its MB/s counts whole record
// batches (the bytes on the wire that carry records), not only values.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchCRCFrom: a v2 batch's CRC-32C covers attributes to the end (KIP-98).
const batchCRCFrom = 21

// rawPartBytes is each partition's fetch size (kgo's default).
const rawPartBytes = 1 << 20

// RunRawConsume reads every partition of cfg.Topic from its start offset to
// the end offset it had when the workload started, with raw Fetch requests
// (cfg.Records and IdleTimeout are not used: the range is fixed up front).
// Bytes counts record-batch bytes.
func RunRawConsume(ctx context.Context, cfg ConsumeConfig) (ConsumeResult, error) {
	if err := cfg.Validate(); err != nil {
		return ConsumeResult{}, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: client: %w", err)
	}
	defer cl.Close()
	t, err := rawMetadata(ctx, cl, cfg.Topic)
	if err != nil {
		return ConsumeResult{}, err
	}
	starts, ends, err := offsetRange(ctx, cl, cfg.Topic)
	if err != nil {
		return ConsumeResult{}, err
	}
	res := ConsumeResult{EndToEnd: NewHistogram()}
	for p, end := range ends {
		res.Wanted += end - starts[p]
	}
	start := time.Now()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for leader, parts := range t.byLeader(starts, ends) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bytes, records, err := fetchAll(ctx, cl.Broker(int(leader)), t, parts, ends)
			mu.Lock()
			defer mu.Unlock()
			res.Bytes += bytes
			res.Records += records
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, firstErr
}

// rawTopic is the topic as Fetch names it, with each partition's leader.
type rawTopic struct {
	name    string
	id      [16]byte
	leaders map[int32]int32 // partition -> leader node
}

// byLeader groups the partitions with something to read by leader: leader
// -> partition -> next offset.
func (t rawTopic) byLeader(starts, ends map[int32]int64) map[int32]map[int32]int64 {
	out := map[int32]map[int32]int64{}
	for p, leader := range t.leaders {
		if starts[p] >= ends[p] {
			continue
		}
		if out[leader] == nil {
			out[leader] = map[int32]int64{}
		}
		out[leader][p] = starts[p]
	}
	return out
}

func rawMetadata(ctx context.Context, cl *kgo.Client, topic string) (rawTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return rawTopic{}, fmt.Errorf("bench: metadata: %w", err)
	}
	if len(resp.Topics) != 1 {
		return rawTopic{}, fmt.Errorf("bench: metadata: %d topics", len(resp.Topics))
	}
	mt := resp.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return rawTopic{}, fmt.Errorf("bench: metadata of %s: %w", topic, err)
	}
	t := rawTopic{name: topic, id: mt.TopicID, leaders: map[int32]int32{}}
	for _, p := range mt.Partitions {
		if p.Leader < 0 {
			return rawTopic{}, fmt.Errorf("bench: %s/%d has no leader", topic, p.Partition)
		}
		t.leaders[p.Partition] = p.Leader
	}
	return t, nil
}

// offsetRange lists every partition's start and end offsets.
func offsetRange(ctx context.Context, cl *kgo.Client, topic string) (starts, ends map[int32]int64, err error) {
	list := func(ts int64) (map[int32]int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		meta, err := rawMetadata(ctx, cl, topic)
		if err != nil {
			return nil, err
		}
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

// fetchAll fetches parts (partition -> next offset) from one leader until
// each reaches its end.
func fetchAll(ctx context.Context, b *kgo.Broker, t rawTopic, parts, ends map[int32]int64) (bytes, records int64, err error) {
	for len(parts) > 0 {
		if err := ctx.Err(); err != nil {
			return bytes, records, err
		}
		kresp, err := b.Request(ctx, rawFetchRequest(t, parts))
		if err != nil {
			return bytes, records, fmt.Errorf("bench: fetch: %w", err)
		}
		n, recs, err := takeFetch(kresp.(*kmsg.FetchResponse), parts, ends)
		bytes += n
		records += recs
		if err != nil {
			return bytes, records, err
		}
	}
	return bytes, records, nil
}

func rawFetchRequest(t rawTopic, parts map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 50 << 20 // kgo's FetchMaxBytes default
	req.SessionEpoch = -1   // no fetch session: full requests
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = t.name, t.id
	for p, next := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, next, rawPartBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// takeFetch accounts one Fetch response, advancing parts and dropping those
// that reached their end.
func takeFetch(resp *kmsg.FetchResponse, parts, ends map[int32]int64) (bytes, records int64, err error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, 0, fmt.Errorf("bench: fetch: %w", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			next, ok := parts[rp.Partition]
			if !ok {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if kerr.IsRetriable(err) {
					continue
				}
				return bytes, records, fmt.Errorf("bench: fetch partition %d at %d: %w", rp.Partition, next, err)
			}
			n, recs, newNext, err := walkBatches(rp.RecordBatches, next, ends[rp.Partition])
			if err != nil {
				return bytes, records, fmt.Errorf("bench: partition %d at %d: %w", rp.Partition, next, err)
			}
			bytes, records = bytes+n, records+recs
			parts[rp.Partition] = newNext
			if newNext >= ends[rp.Partition] {
				delete(parts, rp.Partition)
			}
		}
	}
	return bytes, records, nil
}

// walkBatches checks the whole batches of b (a trailing partial batch, as a
// broker may send at the size limit, is ignored) and returns the bytes and
// records of those below end, and the offset after the last one.
func walkBatches(b []byte, next, end int64) (n, records, newNext int64, err error) {
	newNext = next
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			break // partial trailing batch
		}
		size := 12 + int64(rb.Length)
		if size < batchCRCFrom {
			return n, records, newNext, fmt.Errorf("bench: batch length %d", rb.Length)
		}
		if size > int64(len(b)) {
			break // partial trailing batch
		}
		batch := b[:size]
		b = b[size:]
		if crc32.Checksum(batch[batchCRCFrom:], castagnoli) != uint32(rb.CRC) {
			return n, records, newNext, errors.New("bench: batch CRC-32C mismatch")
		}
		last := rb.FirstOffset + int64(rb.LastOffsetDelta)
		if rb.FirstOffset >= end {
			break
		}
		if last < newNext {
			continue // wholly before the fetch offset
		}
		n += size
		records += int64(rb.NumRecords)
		newNext = last + 1
	}
	return n, records, newNext, nil
}
