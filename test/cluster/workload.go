package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/test/history"
)

// Bounds of Workload.Finish's phases.
const (
	flushTimeout     = 60 * time.Second
	catchUpTimeout   = 60 * time.Second
	finalReadTimeout = 60 * time.Second
)

// maxBuffered bounds each producer's buffered records.
const maxBuffered = 20000

// WorkloadConfig describes a produce/consume workload. Zero values take the
// defaults.
type WorkloadConfig struct {
	Topic      string
	Partitions int32 // records go round-robin over 0..Partitions-1; default 1
	Producers  int   // idempotent acks=all clients; default 1
	Consumers  int   // each reads every partition from the start; default 1
	Rate       int   // records per second per producer; default 200
	ValueSize  int   // bytes per value (at least the unique id); default 64
	// ProducerOpts and ConsumerOpts, if set, add options to the client of
	// producer i and consumer i (a diskless zone, say).
	ProducerOpts, ConsumerOpts func(i int) []kgo.Opt
}

// Workload runs producers and consumers against a cluster and records every
// attempt, outcome and observation in H.
type Workload struct {
	c   *Cluster
	cfg WorkloadConfig
	H   *history.History

	// produceCtx ends the producer loops; recordCtx (ended only at cleanup)
	// is the records' context, so that Finish's flush completes them.
	produceCtx, recordCtx, consumeCtx         context.Context
	stopProducers, stopRecords, stopConsumers context.CancelFunc
	producers                                 []*kgo.Client
	produceWG, consumeWG                      sync.WaitGroup

	acked, unknown atomic.Int64
	maxAckLatency  atomic.Int64 // nanoseconds, from Produce to the acknowledgement
	// progress[consumer][partition] is the next offset the consumer expects.
	progress []progress
	errs     struct {
		sync.Mutex
		first []string // first few produce errors, for the log
	}
}

type progress struct {
	sync.Mutex
	next map[int32]int64
}

// StartWorkload starts the producers and consumers; Finish stops them.
func (c *Cluster) StartWorkload(cfg WorkloadConfig) *Workload {
	c.t.Helper()
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	if cfg.Producers == 0 {
		cfg.Producers = 1
	}
	if cfg.Consumers == 0 {
		cfg.Consumers = 1
	}
	if cfg.Rate == 0 {
		cfg.Rate = 200
	}
	if cfg.ValueSize == 0 {
		cfg.ValueSize = 64
	}
	w := &Workload{c: c, cfg: cfg, H: history.New(), progress: make([]progress, cfg.Consumers)}
	w.produceCtx, w.stopProducers = context.WithCancel(context.Background())
	w.recordCtx, w.stopRecords = context.WithCancel(context.Background())
	w.consumeCtx, w.stopConsumers = context.WithCancel(context.Background())
	c.t.Cleanup(func() {
		w.stopProducers()
		w.stopRecords()
		w.stopConsumers()
		w.produceWG.Wait()
		w.consumeWG.Wait()
	})
	for i := 0; i < cfg.Producers; i++ {
		opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(5 * time.Millisecond), kgo.MaxBufferedRecords(maxBuffered)}
		if cfg.ProducerOpts != nil {
			opts = append(opts, cfg.ProducerOpts(i)...)
		}
		cl := c.Client(opts...)
		w.producers = append(w.producers, cl)
		w.produceWG.Add(1)
		go w.produce(fmt.Sprintf("producer%d", i), cl)
	}
	for i := 0; i < cfg.Consumers; i++ {
		w.progress[i].next = map[int32]int64{}
		w.consumeWG.Add(1)
		go w.consume(i)
	}
	return w
}

// Acked is the number of acknowledged records so far.
func (w *Workload) Acked() int64 { return w.acked.Load() }

// MaxAckLatency is the longest time a record took from Produce to its
// acknowledgement so far.
func (w *Workload) MaxAckLatency() time.Duration { return time.Duration(w.maxAckLatency.Load()) }

// WaitAcked waits until n more records than now are acknowledged.
func (w *Workload) WaitAcked(n int64, timeout time.Duration) {
	w.c.t.Helper()
	target := w.Acked() + n
	w.c.WaitFor(fmt.Sprintf("%d more acknowledged records", n), timeout, func() (bool, string) {
		return w.Acked() >= target, fmt.Sprintf("%d acked, want %d; errors: %s", w.Acked(), target, w.Errors())
	})
}

// Errors returns the first produce errors seen (for messages).
func (w *Workload) Errors() string {
	w.errs.Lock()
	defer w.errs.Unlock()
	return strings.Join(w.errs.first, "; ")
}

func (w *Workload) produce(name string, cl *kgo.Client) {
	defer w.produceWG.Done()
	tick := time.NewTicker(time.Second / time.Duration(w.cfg.Rate))
	defer tick.Stop()
	pad := strings.Repeat("x", max(0, w.cfg.ValueSize-len(name)-10))
	for seq := 0; ; seq++ {
		select {
		case <-w.produceCtx.Done():
			return
		case <-tick.C:
		}
		if cl.BufferedProduceRecords() >= maxBuffered/2 {
			continue // the cluster is not keeping up: skip, so Produce never blocks
		}
		value := fmt.Sprintf("%s-%09d%s", name, seq, pad)
		partition := int32(seq % int(w.cfg.Partitions))
		key := fmt.Sprintf("k%d", seq%16)
		w.H.Produce(name, value, key, partition)
		rec := &kgo.Record{Topic: w.cfg.Topic, Partition: partition, Key: []byte(key), Value: []byte(value)}
		sent := time.Now()
		cl.Produce(w.recordCtx, rec, func(r *kgo.Record, err error) { w.produced(r, err, time.Since(sent)) })
	}
}

// produced records an outcome. Every error is Unknown: after a timeout or a
// retried error the record may exist.
func (w *Workload) produced(r *kgo.Record, err error, latency time.Duration) {
	if err == nil {
		w.H.Ack(string(r.Value), r.Partition, r.Offset)
		w.acked.Add(1)
		for old := w.maxAckLatency.Load(); int64(latency) > old; old = w.maxAckLatency.Load() {
			if w.maxAckLatency.CompareAndSwap(old, int64(latency)) {
				break
			}
		}
		return
	}
	w.H.Unknown(string(r.Value))
	w.unknown.Add(1)
	w.errs.Lock()
	if len(w.errs.first) < 5 {
		w.errs.first = append(w.errs.first, err.Error())
	}
	w.errs.Unlock()
}

// consume reads every partition from its start in one session (one client
// for the workload's life), recording observations in poll order.
func (w *Workload) consume(i int) {
	defer w.consumeWG.Done()
	session := fmt.Sprintf("consumer%d", i)
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < w.cfg.Partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: offsets}),
		kgo.FetchMaxWait(500 * time.Millisecond)}
	if w.cfg.ConsumerOpts != nil {
		opts = append(opts, w.cfg.ConsumerOpts(i)...)
	}
	cl := w.c.Client(opts...)
	defer cl.Close()
	for w.consumeCtx.Err() == nil {
		fetches := cl.PollFetches(w.consumeCtx)
		fetches.EachRecord(func(r *kgo.Record) {
			w.H.Observe(session, r.Partition, r.Offset, string(r.Value))
			w.progress[i].Lock()
			w.progress[i].next[r.Partition] = r.Offset + 1
			w.progress[i].Unlock()
		})
	}
}

// Finish stops producing (flushing what is buffered), waits for the
// consumers to reach every partition's end, reads each partition in full
// once more, and returns the checker's report. The error says what could not
// be done (consumers behind, final read incomplete).
func (w *Workload) Finish() (history.Report, error) {
	_, err := w.Drain()
	return w.H.Check(), err
}

// Drain is Finish without the check: it returns every partition's end
// offset (HW) once the producers stopped, so that more readers of the
// topic (consumer groups) can be finished and recorded in H before H is
// checked. The ends are nil if they could not be listed.
func (w *Workload) Drain() (ends map[int32]int64, err error) {
	w.stopProducers()
	w.produceWG.Wait()
	for _, cl := range w.producers {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		_ = cl.Flush(ctx) // on timeout the rest fail as Unknown at Close
		cancel()
		cl.Close()
	}
	starts, ends, err := w.bounds()
	if err != nil {
		w.stopConsumers()
		return nil, err
	}
	errCatchUp := w.waitConsumers(ends)
	w.stopConsumers()
	w.consumeWG.Wait()
	errFinal := w.finalRead(starts, ends)
	w.c.t.Logf("workload %s: %d acked, %d unknown; end offsets %v", w.cfg.Topic, w.acked.Load(), w.unknown.Load(), ends)
	return ends, errors.Join(errCatchUp, errFinal)
}

// bounds lists every partition's log start and end (HW), retrying while the
// cluster settles.
func (w *Workload) bounds() (starts, ends map[int32]int64, err error) {
	adm := kadm.NewClient(w.c.Client())
	deadline := time.Now().Add(catchUpTimeout)
	for {
		starts, ends, err = listBounds(adm, w.cfg.Topic, w.cfg.Partitions)
		if err == nil || time.Now().After(deadline) {
			return starts, ends, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func listBounds(adm *kadm.Client, topic string, partitions int32) (starts, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	starts, ends = map[int32]int64{}, map[int32]int64{}
	for _, list := range []struct {
		f   func(context.Context, ...string) (kadm.ListedOffsets, error)
		out map[int32]int64
	}{{adm.ListStartOffsets, starts}, {adm.ListEndOffsets, ends}} {
		listed, err := list.f(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list offsets of %s: %w", topic, err)
		}
		listed.Each(func(o kadm.ListedOffset) { list.out[o.Partition] = o.Offset })
	}
	for p := int32(0); p < partitions; p++ {
		if _, ok := ends[p]; !ok {
			return nil, nil, fmt.Errorf("list offsets of %s: no partition %d", topic, p)
		}
	}
	return starts, ends, nil
}

// waitConsumers waits until every consumer has read up to ends.
func (w *Workload) waitConsumers(ends map[int32]int64) error {
	deadline := time.Now().Add(catchUpTimeout)
	for {
		behind := w.behind(ends)
		if behind == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consumers did not read everything within %v: %s", catchUpTimeout, behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *Workload) behind(ends map[int32]int64) string {
	var out []string
	for i := range w.progress {
		w.progress[i].Lock()
		for p, end := range ends {
			if next := w.progress[i].next[p]; next < end {
				out = append(out, fmt.Sprintf("consumer%d p%d at %d of %d", i, p, next, end))
			}
		}
		w.progress[i].Unlock()
	}
	return strings.Join(out, ", ")
}

// finalRead reads [start, end) of every partition into the history.
func (w *Workload) finalRead(starts, ends map[int32]int64) error {
	offsets := map[int32]kgo.Offset{}
	records := map[int32][]history.Record{}
	for p := int32(0); p < w.cfg.Partitions; p++ {
		offsets[p] = kgo.NewOffset().At(starts[p])
	}
	cl := w.c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: offsets}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), finalReadTimeout)
	defer cancel()
	done := func() bool {
		for p := int32(0); p < w.cfg.Partitions; p++ {
			if n := len(records[p]); ends[p] > starts[p] && (n == 0 || records[p][n-1].Offset < ends[p]-1) {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				records[r.Partition] = append(records[r.Partition], history.Record{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	for p := int32(0); p < w.cfg.Partitions; p++ {
		w.H.Final(p, starts[p], records[p])
	}
	if !done() {
		return fmt.Errorf("final read incomplete after %v", finalReadTimeout)
	}
	return nil
}
