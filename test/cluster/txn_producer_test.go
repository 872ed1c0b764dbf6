package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/test/history"
)

// keyedProducer is an idempotent acks=all producer of keyed records for the
// transaction tests: key i goes to partition i % partitions, each key's
// values are numbered in produce order ("k03-000017"), and every attempt
// and outcome is recorded in H.
type keyedProducer struct {
	t          *testing.T
	cl         *kgo.Client
	topic      string
	partitions int32
	keys       int
	H          *history.History

	stopCh  chan struct{}
	done    chan struct{}
	acked   atomic.Int64
	unknown atomic.Int64
	errs    struct {
		sync.Mutex
		first []string
	}
}

// startKeyedProducer produces rate records per second until stop.
func startKeyedProducer(t *testing.T, c *Cluster, topic string, partitions int32, keys, rate int, opts ...kgo.Opt) *keyedProducer {
	t.Helper()
	all := append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond), kgo.MaxBufferedRecords(maxBuffered)}, opts...)
	kp := &keyedProducer{t: t, cl: c.Client(all...), topic: topic, partitions: partitions, keys: keys,
		H: history.New(), stopCh: make(chan struct{}), done: make(chan struct{})}
	go kp.run(rate)
	t.Cleanup(kp.stopNow)
	return kp
}

func (kp *keyedProducer) run(rate int) {
	defer close(kp.done)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	seq := make([]int, kp.keys)
	for i := 0; ; i++ {
		select {
		case <-kp.stopCh:
			return
		case <-tick.C:
		}
		if kp.cl.BufferedProduceRecords() >= maxBuffered/2 {
			continue // the cluster is not keeping up: never block in Produce
		}
		k := i % kp.keys
		key, value := fmt.Sprintf("k%02d", k), fmt.Sprintf("k%02d-%06d", k, seq[k])
		seq[k]++
		p := int32(k) % kp.partitions
		kp.H.Produce("keyed", value, key, p)
		kp.cl.Produce(context.Background(), &kgo.Record{Topic: kp.topic, Partition: p, Key: []byte(key), Value: []byte(value)}, kp.produced)
	}
}

func (kp *keyedProducer) produced(r *kgo.Record, err error) {
	if err == nil {
		kp.H.Ack(string(r.Value), r.Partition, r.Offset)
		kp.acked.Add(1)
		return
	}
	kp.H.Unknown(string(r.Value))
	kp.unknown.Add(1)
	kp.errs.Lock()
	if len(kp.errs.first) < 5 {
		kp.errs.first = append(kp.errs.first, err.Error())
	}
	kp.errs.Unlock()
}

// Errors returns the first produce errors (for messages).
func (kp *keyedProducer) Errors() string {
	kp.errs.Lock()
	defer kp.errs.Unlock()
	return strings.Join(kp.errs.first, "; ")
}

// waitAcked waits until n more records than now are acknowledged.
func (kp *keyedProducer) waitAcked(c *Cluster, n int64, timeout time.Duration) {
	kp.t.Helper()
	target := kp.acked.Load() + n
	c.WaitFor(fmt.Sprintf("%d more acknowledged records on %s", n, kp.topic), timeout, func() (bool, string) {
		return kp.acked.Load() >= target, fmt.Sprintf("%d acked, want %d; errors: %s", kp.acked.Load(), target, kp.Errors())
	})
}

// stop ends the loop and flushes (bounded); what is left fails as Unknown.
func (kp *keyedProducer) stop() {
	kp.stopNow()
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := kp.cl.Flush(ctx); err != nil {
		kp.t.Logf("flush of %s: %v", kp.topic, err)
	}
	kp.cl.Close()
}

func (kp *keyedProducer) stopNow() {
	select {
	case <-kp.stopCh:
	default:
		close(kp.stopCh)
	}
	<-kp.done
}

// checkHistory gives H the final read of the topic and fails t on any
// anomaly the history checker finds.
func (kp *keyedProducer) checkHistory(t *testing.T, read logRead) history.Report {
	t.Helper()
	for p := int32(0); p < kp.partitions; p++ {
		var recs []history.Record
		for _, r := range read.Records[p] {
			recs = append(recs, history.Record{Offset: r.Offset, Value: r.Value})
		}
		kp.H.Final(p, read.Starts[p], recs)
	}
	rep := kp.H.Check()
	t.Logf("history of %s: %s", kp.topic, rep.Stats)
	if err := rep.Err(); err != nil {
		t.Errorf("history checker (%s): %v", kp.topic, err)
	}
	return rep
}
