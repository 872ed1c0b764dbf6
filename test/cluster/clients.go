package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// metadataTimeout bounds one metadata question to one broker.
const metadataTimeout = 3 * time.Second

// Addrs returns the client addresses of the given brokers (default: all
// started ones).
func (c *Cluster) Addrs(ids ...int32) []string {
	var out []string
	for _, b := range c.Brokers() {
		if len(ids) == 0 || slices.Contains(ids, b.ID) {
			out = append(out, b.Addr)
		}
	}
	return out
}

// Client returns a franz-go client seeded with every started broker (direct
// addresses, never proxies), closed at cleanup.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(c.Addrs()...),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(60 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client on a fresh Client.
func (c *Cluster) Admin() *kadm.Client { return kadm.NewClient(c.Client()) }

// BrokerClient returns a client seeded with broker id only; requests sent
// with Direct reach exactly that broker.
func (c *Cluster) BrokerClient(id int32, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(c.Broker(id).Addr), kgo.RequestTimeoutOverhead(5 * time.Second)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Direct sends req to the seed broker of cl (see BrokerClient), unretried.
func Direct(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// CreateTopic creates a topic with rf replicas and the given configs; any
// error fails the test.
func (c *Cluster) CreateTopic(topic string, partitions int32, rf int16, configs map[string]string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := c.Admin().CreateTopic(ctx, partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s (partitions %d, rf %d): %v", topic, partitions, rf, err)
	}
}

// WaitFor polls cond every 100ms until it holds; after timeout it fails the
// test with what and cond's last explanation.
func (c *Cluster) WaitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			c.t.Fatalf("waited %v for %s; last: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RawBatch encodes an uncompressed, non-idempotent RecordBatch v2 of values
// with kmsg (the CRC-32C is computed over kmsg's encoding).
func RawBatch(values ...string) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i, v := range values {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the body without its 1-byte Length 0
		records = rec.AppendTo(records)
	}
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: records,
	}
	batch.Length = int32(recordbatch.MinLength + len(records)) // bytes after the Length field
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[recordbatch.PosCRC:], recordbatch.Checksum(raw[recordbatch.PosAttributes:]))
	return raw
}

// ProduceDirect sends one Produce of values to exactly broker id. It returns
// the partition's Kafka error (nil: success at base offset) or the transport
// error (a timeout, say).
func (c *Cluster) ProduceDirect(ctx context.Context, cl *kgo.Client, acks int16, timeout time.Duration,
	topic string, partition int32, values ...string) (int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, int32(timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, RawBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := Direct(ctx, cl, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("produce: want one partition in the response, got %+v", r.Topics)
	}
	p := r.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}
