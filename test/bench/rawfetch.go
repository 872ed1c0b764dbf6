package bench

// The raw Fetch client: what the broker can serve, without a consumer
// library's CPU in the way. Both `strata bench consume --client raw`
// (RunRawConsume) and tierbench's raw cold and backfill readers use it.
//
// A kgo consumer decodes every record (varints, a *kgo.Record each); on a
// 2-core machine that client takes the CPU the broker needs, so a kgo
// consume measures the client. ReadRaw sends kmsg Fetch requests straight
// to each partition's leader over its own connection (rawconn.go: no
// record decoding, one reused response buffer) and only walks the
// returned batches: their framing, offsets and CRC-32C (Castagnoli, as
// Kafka's v2 batch CRC), so a broker serving garbage cannot look fast. It
// keeps one connection and one Fetch in flight per leader, like kgo's
// consumer. Its byte counts are whole record batches (the bytes on the
// wire that carry records), not only values.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

const (
	// batchCRCFrom: a v2 batch's CRC-32C covers attributes to the end
	// (KIP-98); it is also the shortest length a batch can claim.
	batchCRCFrom = 21
	// rawPartBytes is the default per-partition fetch size (kgo's
	// FetchMaxPartitionBytes default).
	rawPartBytes = 1 << 20
	// rawMaxBytes is each Fetch's MaxBytes (kgo's FetchMaxBytes default).
	rawMaxBytes = 50 << 20
)

// errRawBatch: a fetched record batch is malformed or fails its CRC.
var errRawBatch = errors.New("bench: bad record batch")

// RawOptions tune ReadRaw. The zero value is usable.
type RawOptions struct {
	// PartitionMaxBytes is each partition's Fetch size. Default 1 MiB
	// (kgo's FetchMaxPartitionBytes default).
	PartitionMaxBytes int32
	// BytesPerSec paces each leader's reader: after each Fetch it sleeps
	// until the batch bytes it read since the start are within this rate
	// (so the total is this times the number of leaders). 0: flat out.
	BytesPerSec float64
	// ClientID is the client id the requests carry. Default
	// "strata-bench-raw".
	ClientID string
	// Logger gets the warnings. Default slog.Default().
	Logger *slog.Logger
}

// Validate fills defaults and rejects impossible settings.
func (o *RawOptions) Validate() error {
	if o.PartitionMaxBytes == 0 {
		o.PartitionMaxBytes = rawPartBytes
	}
	if o.ClientID == "" {
		o.ClientID = "strata-bench-raw"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PartitionMaxBytes < 0 || o.BytesPerSec < 0 {
		return fmt.Errorf("%w: negative partition fetch size or rate", ErrInvalidConfig)
	}
	return nil
}

// RawResult is what ReadRaw read.
type RawResult struct {
	Records int64
	Bytes   int64 // whole record-batch bytes
	// Elapsed runs from the first dial to the last leader's end.
	Elapsed time.Duration
	// Complete: every partition reached its end (false when ctx ended
	// first).
	Complete bool
}

// ReadRaw reads every partition p of to from offset from[p] (0 when from
// has none) up to to[p] with raw Fetch requests, one connection and one
// Fetch in flight per leader, until done or ctx ends. Partitions with
// from[p] >= to[p] are skipped. A ctx ending is not an error, in whichever
// request it stops (Metadata, a dial, a Fetch): Complete is then false, as
// when a kgo consumer's poll loop ends. (A loop calling ReadRaw until ctx
// ends, as tierbench's backfill does, must not fail because the end came
// during the Metadata request.)
func ReadRaw(ctx context.Context, brokers []string, topic string, from, to map[int32]int64, o RawOptions) (RawResult, error) {
	if err := o.Validate(); err != nil {
		return RawResult{}, err
	}
	res, err := readRaw(ctx, brokers, topic, from, to, o)
	if err != nil && ctx.Err() != nil {
		res.Complete, err = false, nil
	}
	return res, err
}

// readRaw is ReadRaw once o is valid.
func readRaw(ctx context.Context, brokers []string, topic string, from, to map[int32]int64, o RawOptions) (RawResult, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return RawResult{}, fmt.Errorf("bench: client: %w", err)
	}
	defer cl.Close()
	t, err := rawMetadata(ctx, cl, topic, o.Logger)
	if err != nil {
		return RawResult{}, err
	}
	if t.version, err = fetchVersion(ctx, cl); err != nil {
		return RawResult{}, fmt.Errorf("bench: api versions: %w", err)
	}
	byLeader, err := t.byLeader(from, to)
	if err != nil {
		return RawResult{}, err
	}
	start := time.Now()
	results := make(chan leaderResult, len(byLeader))
	for leader, parts := range byLeader {
		go func() { results <- readLeader(ctx, t, leader, parts, to, o, start) }()
	}
	res := RawResult{Complete: true}
	var firstErr error
	for range byLeader {
		r := <-results
		res.Records += r.records
		res.Bytes += r.bytes
		res.Complete = res.Complete && r.complete
		if firstErr == nil && r.err != nil {
			firstErr = r.err
		}
	}
	res.Elapsed = time.Since(start)
	return res, firstErr
}

// rawTopic is the topic as Fetch names it, with each partition's leader.
type rawTopic struct {
	name    string
	id      [16]byte
	leaders map[int32]int32  // partition -> leader node (-1: none)
	addrs   map[int32]string // node -> host:port
	version int16            // Fetch version to send
}

// rawMetadata looks the topic up with one Metadata request.
func rawMetadata(ctx context.Context, cl *kgo.Client, topic string, log *slog.Logger) (rawTopic, error) {
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
	t := rawTopic{name: topic, id: mt.TopicID, leaders: map[int32]int32{}, addrs: map[int32]string{}}
	for _, b := range resp.Brokers {
		t.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, p := range mt.Partitions {
		leader := p.Leader
		if leader < 0 && len(resp.Brokers) == 1 {
			// No leader named (LEADER_NOT_AVAILABLE), but a single broker
			// can only be the leader: ask it.
			log.Warn("raw fetch: metadata names no leader; using the only broker",
				"topic", topic, "partition", p.Partition, "error_code", p.ErrorCode, "broker", resp.Brokers[0].NodeID)
			leader = resp.Brokers[0].NodeID
		}
		t.leaders[p.Partition] = leader
	}
	return t, nil
}

// byLeader groups the partitions with something to read by leader: leader
// -> partition -> next offset. Only the partitions read need a leader.
func (t rawTopic) byLeader(from, to map[int32]int64) (map[int32]map[int32]int64, error) {
	out := map[int32]map[int32]int64{}
	for p, end := range to {
		if from[p] >= end {
			continue
		}
		leader, ok := t.leaders[p]
		switch {
		case !ok:
			return nil, fmt.Errorf("bench: %s/%d not in metadata", t.name, p)
		case leader < 0:
			return nil, fmt.Errorf("bench: %s/%d has no leader", t.name, p)
		}
		if out[leader] == nil {
			out[leader] = map[int32]int64{}
		}
		out[leader][p] = from[p]
	}
	return out, nil
}

// leaderResult is what one leader's reader read.
type leaderResult struct {
	records, bytes int64
	complete       bool
	err            error
}

// readLeader dials leader and fetches parts (partition -> next offset)
// from it until each reaches its end in ends, or ctx ends.
func readLeader(ctx context.Context, t rawTopic, leader int32, parts, ends map[int32]int64, o RawOptions, start time.Time) leaderResult {
	c, err := dialRaw(ctx, t.addrs[leader], o.ClientID, t.version)
	if err != nil {
		return leaderResult{err: fmt.Errorf("bench: dialing broker %d at %q: %w", leader, t.addrs[leader], err)}
	}
	defer c.Close()
	var res leaderResult
	for len(parts) > 0 && ctx.Err() == nil {
		resp, err := c.fetch(ctx, fetchRequest(t, parts, o.PartitionMaxBytes))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			res.err = fmt.Errorf("bench: fetch from broker %d: %w", leader, err)
			return res
		}
		if err := res.take(resp, parts, ends); err != nil {
			res.err = err
			return res
		}
		pace(ctx, start, res.bytes, o.BytesPerSec)
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
	req.MaxBytes = rawMaxBytes
	req.SessionEpoch = -1 // no fetch session: full requests
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
// that reached their end. Partitions with a retriable error are asked
// again by the next Fetch.
func (res *leaderResult) take(resp *kmsg.FetchResponse, parts, ends map[int32]int64) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("bench: fetch: %w", err)
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
				return fmt.Errorf("bench: fetch partition %d at %d: %w", rp.Partition, next, err)
			}
			n, recs, newNext, err := walkBatches(rp.RecordBatches, next, ends[rp.Partition])
			if err != nil {
				return fmt.Errorf("bench: partition %d at %d: %w", rp.Partition, next, err)
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
// Each batch's length is checked against b before it is sliced.
func walkBatches(b []byte, next, end int64) (n, records, newNext int64, err error) {
	newNext = next
	for len(b) >= 12 {
		length := int64(int32(binary.BigEndian.Uint32(b[8:12]))) // after baseOffset
		if length < batchCRCFrom-12 {
			return n, records, newNext, fmt.Errorf("%w: length %d", errRawBatch, length)
		}
		size := 12 + length
		if size > int64(len(b)) {
			break // partial
		}
		batch := b[:size]
		b = b[size:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batch); err != nil {
			return n, records, newNext, fmt.Errorf("%w: %d bytes: %v", errRawBatch, size, err)
		}
		if recordbatch.Checksum(batch[batchCRCFrom:]) != uint32(rb.CRC) {
			return n, records, newNext, fmt.Errorf("%w: CRC-32C mismatch", errRawBatch)
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

// pace sleeps until bytes read since start are within bytesPerSec.
func pace(ctx context.Context, start time.Time, bytes int64, bytesPerSec float64) {
	if bytesPerSec <= 0 {
		return
	}
	due := start.Add(time.Duration(float64(bytes) / bytesPerSec * float64(time.Second)))
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(due)):
	}
}
