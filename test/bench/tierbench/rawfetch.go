package main

// The raw-fetch client: the cold read without a consumer library's CPU.
//
// A kgo consumer decodes every record (varints, a *kgo.Record each), which
// on a 2-core machine takes CPU from the broker it measures. The raw client
// sends kmsg Fetch requests straight to each partition's leader over its
// own connection (rawconn.go: no record decoding, one reused response
// buffer) and only walks the returned batches: their framing, offsets and
// CRC-32C (Castagnoli, as Kafka's v2 batch CRC), so a broker serving
// garbage could not look fast. It keeps one Fetch in flight per leader,
// like kgo's consumer.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchCRCFrom: a v2 batch's CRC-32C covers attributes to the end (KIP-98).
const batchCRCFrom = 21

// rawTopic is the topic as Fetch names it, with each partition's leader.
type rawTopic struct {
	name    string
	id      [16]byte
	leaders map[int32]int32  // partition -> leader node
	addrs   map[int32]string // node -> host:port
	version int16            // Fetch version to send
}

// rawMetadata looks the topic up with one Metadata request.
func rawMetadata(ctx context.Context, cl *kgo.Client, topic string) (rawTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return rawTopic{}, err
	}
	if len(resp.Topics) != 1 {
		return rawTopic{}, fmt.Errorf("metadata: %d topics", len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return rawTopic{}, fmt.Errorf("metadata %s: %w", topic, err)
	}
	out := rawTopic{name: topic, id: t.TopicID, leaders: map[int32]int32{}, addrs: map[int32]string{}}
	for _, b := range resp.Brokers {
		out.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, p := range t.Partitions {
		leader := p.Leader
		if leader < 0 && len(resp.Brokers) == 1 {
			// No leader named (LEADER_NOT_AVAILABLE), but a single broker
			// can only be the leader: ask it.
			say("raw fetch: metadata names no leader for %s/%d (error %d); using the only broker, %d",
				topic, p.Partition, p.ErrorCode, resp.Brokers[0].NodeID)
			leader = resp.Brokers[0].NodeID
		}
		out.leaders[p.Partition] = leader
	}
	return out, nil
}

// readColdRaw reads every partition in ends from offset 0 to its end with
// raw Fetch requests, one in flight per leader, until done or ctx ends.
// records counts records; valueBytes counts whole record-batch bytes.
func readColdRaw(ctx context.Context, brokers []string, topic string, ends map[int32]int64, o coldOpts) (coldRead, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return coldRead{}, err
	}
	defer cl.Close()
	t, err := rawMetadata(ctx, cl, topic)
	if err != nil {
		return coldRead{}, err
	}
	if t.version, err = fetchVersion(ctx, cl); err != nil {
		return coldRead{}, err
	}
	byLeader := map[int32]map[int32]int64{} // leader -> partition -> next offset
	for p := range ends {
		leader, ok := t.leaders[p]
		if !ok {
			return coldRead{}, fmt.Errorf("partition %d not in metadata", p)
		}
		if byLeader[leader] == nil {
			byLeader[leader] = map[int32]int64{}
		}
		byLeader[leader][p] = 0
	}
	start := time.Now()
	results := make(chan rawResult, len(byLeader))
	for leader, parts := range byLeader {
		go func() {
			c, err := dialRaw(ctx, t.addrs[leader], t.version)
			if err != nil {
				results <- rawResult{err: fmt.Errorf("dialing broker %d at %q: %w", leader, t.addrs[leader], err)}
				return
			}
			defer c.Close()
			results <- fetchFromLeader(ctx, c, t, parts, ends, o, start)
		}()
	}
	var res coldRead
	res.complete = true
	var firstErr error
	for range byLeader {
		r := <-results
		res.records += r.records
		res.valueBytes += r.bytes
		res.complete = res.complete && r.complete
		if firstErr == nil && r.err != nil {
			firstErr = r.err
		}
	}
	res.elapsed = time.Since(start)
	return res, firstErr
}

// rawResult is what one leader's fetch loop read.
type rawResult struct {
	records, bytes int64
	complete       bool
	err            error
}

// fetchFromLeader fetches parts (partition -> next offset) from one broker
// until each reaches its end.
func fetchFromLeader(ctx context.Context, c *rawConn, t rawTopic, parts map[int32]int64, ends map[int32]int64,
	o coldOpts, start time.Time) rawResult {
	var res rawResult
	partBytes := o.maxPartBytes
	if partBytes <= 0 {
		partBytes = 1 << 20 // kgo's FetchMaxPartitionBytes default
	}
	for len(parts) > 0 && ctx.Err() == nil {
		req := fetchRequest(t, parts, partBytes)
		resp, err := c.fetch(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			res.err = fmt.Errorf("fetch: %w", err)
			return res
		}
		if err := res.take(resp, parts, ends); err != nil {
			res.err = err
			return res
		}
		pace(ctx, start, res.bytes, o.bytesPerSec)
	}
	res.complete = len(parts) == 0
	return res
}

// fetchRequest asks for every partition in parts from its next offset.
func fetchRequest(t rawTopic, parts map[int32]int64, partBytes int32) *kmsg.FetchRequest {
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
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, next, partBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// take accounts one Fetch response, advancing parts and dropping those
// that reached their end.
func (res *rawResult) take(resp *kmsg.FetchResponse, parts map[int32]int64, ends map[int32]int64) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch: %w", err)
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
				return fmt.Errorf("fetch partition %d at %d: %w", rp.Partition, next, err)
			}
			n, recs, newNext, err := walkBatches(rp.RecordBatches, next, ends[rp.Partition])
			if err != nil {
				return fmt.Errorf("partition %d at %d: %w", rp.Partition, next, err)
			}
			res.bytes += n
			res.records += recs
			parts[rp.Partition] = newNext
			if newNext >= ends[rp.Partition] {
				delete(parts, rp.Partition)
			}
		}
	}
	return nil
}

// walkBatches checks the whole batches of b (a trailing partial batch, as
// a broker may send at the size limit, is ignored) and returns the bytes
// and records of those below end, and the offset after the last one.
func walkBatches(b []byte, next, end int64) (n, records, newNext int64, err error) {
	newNext = next
	for len(b) >= 12 {
		size := 12 + int64(int32(binary.BigEndian.Uint32(b[8:12]))) // baseOffset, batchLength
		if size > int64(len(b)) {
			break // partial
		}
		batch := b[:size]
		b = b[size:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batch); err != nil || size < batchCRCFrom {
			return n, records, newNext, fmt.Errorf("bad batch of %d bytes: %v", size, err)
		}
		if crc32.Checksum(batch[batchCRCFrom:], castagnoli) != uint32(rb.CRC) {
			return n, records, newNext, errors.New("batch CRC-32C mismatch")
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
