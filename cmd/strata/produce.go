package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const produceHelp = `usage: strata produce --topic TOPIC [flags] < lines

Write each stdin line as one record (split into key and value with
--key-separator) and wait for every acknowledgement; exit 1 if any record
failed. With --acks 0 the broker acknowledges nothing: the count printed
is of records sent.

A record may be as large as the topic's max.message.bytes allows: the
command reads that setting and sizes its batches to it, so the broker, not
the client, decides what fits. A larger record fails with
MESSAGE_TOO_LARGE. Lines are read up to twice that size (at least 1 MiB,
at most 64 MiB).

Flags:
`

// maxLineBytes is the hard bound on one stdin line, whatever the topic
// allows: the line is held in memory whole.
const maxLineBytes = 64 << 20

// kafkaDefaultMaxMessageBytes is Kafka's max.message.bytes default, used
// when the topic's setting cannot be read.
const kafkaDefaultMaxMessageBytes = 1048588

// kgoBatchOverheadExtra is what kgo counts in a batch's size beyond
// Kafka's: the 4-byte length of the records field in front of the batch.
// Adding it makes kgo's bound equal to the broker's max.message.bytes.
const kgoBatchOverheadExtra = 4

// produceOptions are the parsed flags of `strata produce`.
type produceOptions struct {
	topic     string
	keySep    string
	partition int32 // -1: kgo's default partitioner
	headers   []kgo.RecordHeader
	codec     *kgo.CompressionCodec // nil: kgo's default
	acks      kgo.Acks
}

func parseProduceFlags(c *cli, args []string) (produceOptions, *connFlags, error) {
	fs := newFlagSet("produce", c)
	conn := newConnFlags(fs, c)
	topic := fs.String("topic", "", "topic to write to (required)")
	keySep := fs.String("key-separator", "", "split each line at the first occurrence into key and value (empty: no key)")
	partition := fs.Int("partition", -1, "write every record to this `partition` (-1: by key hash, else spread in batches)")
	var headers stringList
	fs.Var(&headers, "header", "add header `k=v` to every record (repeatable)")
	compression := fs.String("compression", "snappy", "batch compression: none, gzip, snappy, lz4 or zstd")
	acks := fs.String("acks", "all", "acknowledgement to wait for: all (every in-sync replica; idempotent), 1 (the leader) or 0 (none)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), produceHelp)
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return produceOptions{}, nil, firstErr(err, usageErrorf("unexpected arguments %q", rest))
	}
	o := produceOptions{topic: *topic, keySep: *keySep, partition: -1}
	if o.topic == "" {
		return o, nil, usageErrorf("--topic is required")
	}
	if *partition < -1 || *partition > 1<<31-1 {
		return o, nil, usageErrorf("--partition %d: want a partition number ≥ 0", *partition)
	}
	o.partition = int32(*partition)
	var err error
	if o.headers, err = parseHeaders(headers); err != nil {
		return o, nil, err
	}
	if o.codec, err = parseCompression(*compression); err != nil {
		return o, nil, err
	}
	if o.acks, err = parseAcks(*acks); err != nil {
		return o, nil, err
	}
	return o, conn, nil
}

func parseHeaders(items []string) ([]kgo.RecordHeader, error) {
	var headers []kgo.RecordHeader
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--header %q: want key=value", item)
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return headers, nil
}

func parseCompression(name string) (*kgo.CompressionCodec, error) {
	var codec kgo.CompressionCodec
	switch name {
	case "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, usageErrorf("--compression %q: want none, gzip, snappy, lz4 or zstd", name)
	}
	return &codec, nil
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
	return kgo.Acks{}, usageErrorf("--acks %q: want all, 1 or 0", s)
}

// runProduce writes each stdin line as one record; see produceHelp.
func runProduce(ctx context.Context, c *cli, args []string) error {
	o, conn, err := parseProduceFlags(c, args)
	if err != nil {
		return err
	}
	maxMessageBytes, err := prepareTopic(ctx, c, conn, o)
	if err != nil {
		return err
	}
	cl, _, err := conn.client(o.clientOpts(maxMessageBytes)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return produceLines(ctx, c, cl, o, maxMessageBytes)
}

// prepareTopic checks that the topic (and --partition) exist, asking the
// broker to create the topic if it may, and returns the topic's
// max.message.bytes.
func prepareTopic(ctx context.Context, c *cli, conn *connFlags, o produceOptions) (int, error) {
	cl, conf, err := conn.client()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	partitions, err := checkTopic(ctx, cl, conf.seeds, o.topic, true)
	if err != nil {
		return 0, err
	}
	if o.partition >= 0 {
		if err := checkPartitions(o.topic, []int32{o.partition}, partitions); err != nil {
			return 0, err
		}
	}
	describeCtx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	defer cancel()
	maxMessageBytes, err := topicMaxMessageBytes(describeCtx, kadm.NewClient(cl), o.topic)
	if err != nil {
		fmt.Fprintf(c.stderr, "strata produce: reading max.message.bytes of %s: %v; assuming Kafka's default %d\n",
			o.topic, err, kafkaDefaultMaxMessageBytes)
		return kafkaDefaultMaxMessageBytes, nil
	}
	return maxMessageBytes, nil
}

// topicMaxMessageBytes reads the topic's effective max.message.bytes.
func topicMaxMessageBytes(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := configs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, err
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "max.message.bytes" && cfg.Value != nil {
			n, err := strconv.Atoi(*cfg.Value)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("max.message.bytes %q is not a positive integer", *cfg.Value)
			}
			return n, nil
		}
	}
	return 0, errors.New("max.message.bytes not in the topic's configs")
}

// clientOpts are the producing client's options.
func (o produceOptions) clientOpts(maxMessageBytes int) []kgo.Opt {
	// kgo refuses a batch bound of more than 1 GiB; no line is that long.
	batchMax := min(maxMessageBytes+kgoBatchOverheadExtra, maxLineBytes+kgoBatchOverheadExtra)
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(o.topic),
		// Auto-creation is the broker's call (auto.create.topics.enable),
		// as with kcat; kgo only asks for it when allowed to.
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(int32(batchMax)),
		kgo.RequiredAcks(o.acks),
	}
	if o.acks != kgo.AllISRAcks() { // kgo's idempotent producer needs acks=all
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if o.codec != nil {
		opts = append(opts, kgo.ProducerBatchCompression(*o.codec))
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts
}

// produceLines produces stdin's lines and waits for every acknowledgement.
func produceLines(ctx context.Context, c *cli, cl *kgo.Client, o produceOptions, maxMessageBytes int) error {
	var (
		mu       sync.Mutex // guards firstErr and acked, written by promises
		firstErr error
		acked    int
	)
	promise := func(r *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			acked++
		case firstErr != nil:
		case errors.Is(err, kerr.MessageTooLarge):
			firstErr = fmt.Errorf("a record of %d bytes (key and value) does not fit the topic's max.message.bytes of %d: %w",
				len(r.Key)+len(r.Value), maxMessageBytes, err)
		default:
			firstErr = err
		}
	}
	// A line somewhat over the topic's limit still reaches the producer, so
	// it fails with MESSAGE_TOO_LARGE naming the limit.
	lineLimit := min(max(2*maxMessageBytes, 1<<20), maxLineBytes)
	scanner := bufio.NewScanner(c.stdin)
	scanner.Buffer(make([]byte, 64<<10), lineLimit)
	lines := 0
	for scanner.Scan() && ctx.Err() == nil {
		lines++
		cl.Produce(ctx, o.record(scanner.Text()), promise)
	}
	scanErr := scanner.Err()
	if errors.Is(scanErr, bufio.ErrTooLong) {
		scanErr = fmt.Errorf("stdin line %d is longer than %d bytes, the most this command reads (max.message.bytes of %s is %d)",
			lines+1, lineLimit, o.topic, maxMessageBytes)
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(c.stderr, "produced %d records to %s\n", acked, o.topic)
	return errors.Join(scanErr, firstErr, flushErr)
}

// record is one stdin line as a record, with --header and --partition.
func (o produceOptions) record(line string) *kgo.Record {
	r := lineRecord(line, o.keySep)
	r.Headers = o.headers
	if o.partition >= 0 {
		r.Partition = o.partition
	}
	return r
}

func lineRecord(line, keySep string) *kgo.Record {
	if keySep != "" {
		if key, value, ok := strings.Cut(line, keySep); ok {
			return &kgo.Record{Key: []byte(key), Value: []byte(value)}
		}
	}
	return &kgo.Record{Value: []byte(line)}
}
