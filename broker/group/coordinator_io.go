package group

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/group/consumer"
)

// appended is one batch appended to a partition, waiting to be durable.
type appended struct {
	log      OffsetsLog
	base     int64
	records  []Record
	appendOK bool
}

// delivery is the I/O left after a machine step: wait for the appended
// batches, apply their offset records, then deliver the responses.
type delivery struct {
	appends   []appended
	responses []Response
}

// persistTimeout bounds the wait for a batch of __consumer_offsets to
// become durable.
const persistTimeout = 30 * time.Second

// flushLocked drains the machine and appends its records, one batch per
// partition. REQUIRES: mu held.
func (c *Coordinator) flushLocked() delivery {
	rd := c.mu.machine.Ready()
	d := delivery{responses: rd.Responses, appends: c.mu.pending}
	c.mu.pending = nil
	byPartition := map[int32][]Record{}
	var order []int32
	for _, r := range rd.Records {
		p := c.PartitionFor(r.Group)
		if _, ok := byPartition[p]; !ok {
			order = append(order, p)
		}
		byPartition[p] = append(byPartition[p], r)
	}
	for _, p := range order {
		d.appends = append(d.appends, c.appendLocked(p, byPartition[p]))
	}
	return d
}

func (c *Coordinator) appendLocked(partition int32, records []Record) appended {
	a := appended{records: records}
	op, ok := c.mu.partitions[partition]
	if !ok {
		c.log.Warn("dropping records of an offsets partition no longer led", "partition", partition, "records", len(records))
		return a
	}
	base, err := op.log.Append(EncodeBatch(records, c.nowMs()))
	if err != nil {
		c.log.Warn("appending to offsets partition", "partition", partition, "err", err)
		return a
	}
	a.log, a.base, a.appendOK = op.log, base, true
	return a
}

// complete waits for d's batches, applies their offset records, and
// delivers d's responses. It returns the first persistence error.
func (c *Coordinator) complete(d delivery) error {
	var firstErr error
	for _, a := range d.appends {
		err := errors.New("group: append failed")
		if a.appendOK {
			err = c.waitDurable(a)
		}
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		c.applyAppended(a)
	}
	if firstErr != nil {
		failSyncs(d.responses)
	}
	c.deliver(d.responses)
	return firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func (c *Coordinator) waitDurable(a appended) error {
	ctx, cancel := context.WithTimeout(c.lifetime, persistTimeout)
	defer cancel()
	return a.log.WaitDurable(ctx, a.base+int64(len(a.records))-1)
}

func (c *Coordinator) applyAppended(a appended) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for i, r := range a.records {
		if r.Kind != KindOffset {
			continue
		}
		if err := c.mu.machine.ApplyRecord(now, a.base+int64(i), r); err != nil {
			c.log.Error("applying own offset record", "group", r.Group, "err", err)
		}
	}
}

// failSyncs turns successful sync answers into COORDINATOR_NOT_AVAILABLE
// when the generation they complete could not be persisted; the members
// sync again.
func failSyncs(responses []Response) {
	for i := range responses {
		if s := responses[i].Sync; s != nil && s.Code == 0 {
			responses[i].Sync = &SyncResult{Code: kerr.CoordinatorNotAvailable.Code}
		}
	}
}

func (c *Coordinator) deliver(responses []Response) {
	if len(responses) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range responses {
		if ch, ok := c.mu.waiters[r.Req]; ok {
			ch <- r
			delete(c.mu.waiters, r.Req)
		}
	}
}

// BecomeLeader starts serving an offsets partition: it is loaded in the
// background (COORDINATOR_LOAD_IN_PROGRESS meanwhile). Calling it for a
// partition already led does nothing.
func (c *Coordinator) BecomeLeader(partition int32, log OffsetsLog) {
	c.mu.Lock()
	if _, ok := c.mu.partitions[partition]; ok || c.mu.closed {
		c.mu.Unlock()
		return
	}
	op := &offsetsPartition{log: log}
	c.mu.partitions[partition] = op
	c.mu.Unlock()
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		c.load(partition, op)
	}()
}

// load replays a partition into the machine, then marks it loaded.
func (c *Coordinator) load(partition int32, op *offsetsPartition) {
	start := time.Now()
	offset, hw := op.log.LogStartOffset(), op.log.HighWatermark()
	records := 0
	consumers := map[string][]consumer.Record{} // consumer-protocol records by group, in log order
	for offset < hw {
		data, err := op.log.Read(offset, 1<<20)
		if err == nil && len(data) == 0 {
			break
		}
		next := int64(-1)
		if err == nil {
			next, err = c.applyLoaded(partition, op, data, &records, consumers)
		}
		if err != nil || next <= offset {
			c.log.Error("loading offsets partition; groups of it may be incomplete", "partition", partition, "offset", offset, "err", err)
			break
		}
		offset = next
	}
	c.mu.Lock()
	if c.mu.partitions[partition] == op {
		c.replayConsumersLocked(consumers)
		op.loaded = true
	}
	c.mu.Unlock()
	c.log.Info("offsets partition loaded", "partition", partition, "records", records, "took", time.Since(start))
}

func (c *Coordinator) applyLoaded(partition int32, op *offsetsPartition, data []byte, count *int,
	consumers map[string][]consumer.Record) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[partition] != op {
		return -1, ErrNotLeader
	}
	now := c.nowMs()
	inPartition := func(g string) bool { return c.PartitionFor(g) == partition }
	return walkBatches(data, func(offset, txnProducer int64, key, value []byte) error {
		if isConsumerRecord(key) {
			*count++
			c.collectConsumerRecord(consumers, key, value)
			return nil
		}
		r, ok, err := DecodeRecord(key, value)
		if err != nil || !ok {
			return err
		}
		*count++
		if txnProducer >= 0 {
			return c.mu.machine.AddPendingTxn(now, txnProducer, offset, r)
		}
		return c.mu.machine.ApplyRecord(now, offset, r)
	}, func(producerID int64, commit bool) {
		c.mu.machine.CompleteTxn(now, producerID, commit, inPartition)
	})
}

// Resign stops serving an offsets partition: its groups are forgotten
// (they live on in the log for the next leader).
func (c *Coordinator) Resign(partition int32) {
	c.mu.Lock()
	delete(c.mu.partitions, partition)
	c.dropConsumersLocked(partition)
	c.mu.machine.DropGroups(func(g string) bool { return c.PartitionFor(g) == partition }, kerr.NotCoordinator.Code)
	d := c.flushLocked()
	c.mu.Unlock()
	c.complete(d)
}

// Leads reports whether partition is led (loaded or loading) here.
func (c *Coordinator) Leads(partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.partitions[partition]
	return ok
}
