package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replayProducer produces replayed records into a topic of a running
// cluster (`strata replay --to-brokers`), each into the partition of the
// same number. The first failed produce is kept and returned by the next
// produce or flush: replay stops rather than skip a record.
type replayProducer struct {
	cl    *kgo.Client
	topic string
	mu    sync.Mutex
	err   error // first produce failure; guarded by mu
}

func newReplayProducer(ctx context.Context, seeds []string, topic string, partitions []int32) (*replayProducer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return nil, err
	}
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("replay: target topic %q: %w", topic, err)
	}
	have := int32(len(details[topic].Partitions))
	for _, p := range partitions {
		if p >= have {
			cl.Close()
			return nil, fmt.Errorf("replay: target topic %q has %d partitions; partition %d has no counterpart", topic, have, p)
		}
	}
	return &replayProducer{cl: cl, topic: topic}, nil
}

func (p *replayProducer) produce(partition int32, ts int64, rec *kmsg.Record) error {
	if err := p.failed(); err != nil {
		return err
	}
	r := &kgo.Record{Topic: p.topic, Partition: partition, Key: rec.Key, Value: rec.Value, Timestamp: time.UnixMilli(ts)}
	for _, h := range rec.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	p.cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
		if err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = fmt.Errorf("replay: producing into %s-%d: %w", p.topic, partition, err)
			}
			p.mu.Unlock()
		}
	})
	return nil
}

func (p *replayProducer) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *replayProducer) flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	return p.failed()
}

func (p *replayProducer) close() { p.cl.Close() }
