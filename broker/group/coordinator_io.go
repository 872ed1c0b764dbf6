package group

import (
	"cmp"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/group/consumer"
)

// appended is one batch appended to an offsets partition, with its
// records, waiting to be durable.
type appended struct {
	coordinator.Appended
	records []Record
}

// delivery is the I/O left after a machine step: wait for the appended
// batches, apply their offset records, then deliver the responses.
type delivery struct {
	appends   []appended
	responses []Response
}

// flushLocked drains the machine and appends its records, one batch per
// partition. REQUIRES: mu held.
func (c *Coordinator) flushLocked() delivery {
	rd := c.mu.machine.Ready()
	d := delivery{responses: rd.Responses, appends: c.mu.pending}
	c.mu.pending = nil
	batches := coordinator.SplitByPartition(rd.Records, func(r Record) int32 { return c.PartitionFor(r.Group) })
	for _, b := range batches {
		d.appends = append(d.appends, c.appendLocked(b.Partition, b.Records))
	}
	return d
}

// appendLocked appends records to their offsets partition; a failure is
// logged and left for complete to find. REQUIRES: mu held.
func (c *Coordinator) appendLocked(partition int32, records []Record) appended {
	a, err := c.partitions.AppendLocked(partition, EncodeBatch(records, c.nowMs()), len(records))
	switch {
	case errors.Is(err, coordinator.ErrNotLed):
		c.log.Warn("dropping records of an offsets partition no longer led", "partition", partition, "records", len(records))
	case err != nil:
		c.log.Warn("appending to offsets partition", "partition", partition, "err", err)
	}
	return appended{Appended: a, records: records}
}

// complete waits for d's batches, applies their offset records, and
// delivers d's responses. It returns the first persistence error.
func (c *Coordinator) complete(d delivery) error {
	var firstErr error
	for _, a := range d.appends {
		if err := a.Wait(c.loops.Context()); err != nil {
			firstErr = cmp.Or(firstErr, err)
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

func (c *Coordinator) applyAppended(a appended) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for i, r := range a.records {
		if r.Kind != KindOffset {
			continue
		}
		if err := c.mu.machine.ApplyRecord(now, a.Base+int64(i), r); err != nil {
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
// partition already led does nothing (groups have no leader epoch here:
// every call leads at epoch 0).
func (c *Coordinator) BecomeLeader(partition int32, log coordinator.Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, _ := c.partitions.LeadLocked(partition, log, 0)
	if part == nil {
		return
	}
	c.loops.Go(func() { c.load(partition, part) })
}

// load replays a partition into the machine, then marks it loaded.
func (c *Coordinator) load(partition int32, part *coordinator.Partition) {
	start := time.Now()
	records := 0
	consumers := map[string][]consumer.Record{} // consumer-protocol records by group, in log order
	offset, err := coordinator.Replay(part.Log, func(data []byte) (int64, error) {
		return c.applyLoaded(partition, part, data, &records, consumers)
	})
	if err != nil {
		c.log.Error("loading offsets partition; groups of it may be incomplete", "partition", partition, "offset", offset, "err", err)
	}
	c.mu.Lock()
	if c.partitions.StillLedLocked(partition, part) {
		c.replayConsumersLocked(consumers)
		part.Loaded = true
	}
	c.mu.Unlock()
	c.log.Info("offsets partition loaded", "partition", partition, "records", records, "took", time.Since(start))
}

func (c *Coordinator) applyLoaded(partition int32, part *coordinator.Partition, data []byte, count *int,
	consumers map[string][]consumer.Record) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.partitions.StillLedLocked(partition, part) {
		return -1, coordinator.ErrNotLed
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
	c.partitions.ResignLocked(partition)
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
	_, ok := c.partitions.LookupLocked(partition)
	return ok
}
