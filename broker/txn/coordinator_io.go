package txn

import (
	"cmp"
	"errors"
	"time"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/group"
)

// appended is one batch appended to a partition, with the ids whose
// records it holds, waiting to be durable.
type appended struct {
	coordinator.Appended
	ids []string
}

// delivery is the I/O left after a machine step.
type delivery struct {
	appends []appended
	markers []Markers
}

// flushLocked drains the machine: one batch per partition. REQUIRES: mu.
func (c *Coordinator) flushLocked() delivery {
	rd := c.mu.machine.Ready()
	d := delivery{markers: rd.Markers}
	batches := coordinator.SplitByPartition(rd.Records, func(r Record) int32 { return c.PartitionFor(r.ID) })
	for _, b := range batches {
		d.appends = append(d.appends, c.appendLocked(b.Partition, b.Records))
	}
	return d
}

// appendLocked appends records to their partition. A partition no longer
// led fails the records' writes silently (its ids were dropped with it).
// REQUIRES: mu held.
func (c *Coordinator) appendLocked(partition int32, records []Record) appended {
	a := appended{}
	grs := make([]group.Record, len(records))
	for i, r := range records {
		a.ids = append(a.ids, r.ID)
		grs[i] = group.Record{Key: r.Key, Value: r.Value}
	}
	var err error
	a.Appended, err = c.partitions.AppendLocked(partition, group.EncodeBatch(grs, c.nowMs()), len(records))
	if err != nil && !errors.Is(err, coordinator.ErrNotLed) {
		c.log.Warn("appending to transaction state partition", "partition", partition, "err", err)
	}
	return a
}

// complete waits for d's batches, reports them to the machine, and starts
// the marker jobs that result. It returns the first persistence error.
func (c *Coordinator) complete(d delivery) error {
	var firstErr error
	for _, a := range d.appends {
		err := a.Wait(c.loops.Context())
		firstErr = cmp.Or(firstErr, err)
		c.mu.Lock()
		for _, id := range a.ids {
			c.mu.machine.WriteDone(id, err == nil)
		}
		d.markers = append(d.markers, c.mu.machine.Ready().Markers...)
		c.mu.Unlock()
	}
	for _, job := range d.markers {
		c.startMarkers(job)
	}
	return firstErr
}

// startMarkers runs job in the background unless one runs for its id.
func (c *Coordinator) startMarkers(job Markers) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions.ClosedLocked() || c.mu.markers[job.ID] {
		return
	}
	c.mu.markers[job.ID] = true
	c.loops.Go(func() { c.runMarkers(job) })
}

// runMarkers sends job until every partition took its marker, then
// completes the transaction. It gives up when the id's partition is no
// longer led (the next leader resumes it).
func (c *Coordinator) runMarkers(job Markers) {
	defer func() {
		c.mu.Lock()
		delete(c.mu.markers, job.ID)
		c.mu.Unlock()
	}()
	lifetime := c.loops.Context()
	backoff := c.cfg.MarkerRetryBackoff
	remaining := job
	for {
		c.mu.Lock()
		part, ok := c.partitions.LookupLocked(c.PartitionFor(job.ID))
		epoch := int32(0)
		if ok {
			epoch = part.Epoch
		}
		c.mu.Unlock()
		if !ok || lifetime.Err() != nil {
			return
		}
		if len(remaining.Partitions) > 0 {
			remaining.Partitions = c.sender.SendMarkers(lifetime, remaining, epoch)
		}
		if len(remaining.Partitions) == 0 {
			break
		}
		select {
		case <-lifetime.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	c.mu.Lock()
	c.mu.machine.MarkersDone(c.nowMs(), job)
	d := c.flushLocked()
	c.mu.Unlock()
	if err := c.complete(d); err != nil {
		c.log.Warn("completing transaction", "transactional_id", job.ID, "err", err)
	}
}

// BecomeLeader starts serving a partition of __transaction_state with the
// given leader epoch (the coordinator epoch of its markers): it is loaded
// in the background. Calling it again with the same epoch does nothing; a
// newer epoch means leadership was lost and regained meanwhile, so the
// partition is dropped and loaded anew (another leader may have written).
func (c *Coordinator) BecomeLeader(partition int32, log coordinator.Log, leaderEpoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, replaced := c.partitions.LeadLocked(partition, log, leaderEpoch)
	if part == nil {
		return
	}
	if replaced {
		c.mu.machine.DropIDs(func(id string) bool { return c.PartitionFor(id) == partition })
	}
	c.loops.Go(func() { c.load(partition, part) })
}

// load replays a partition, marks it loaded and resumes its markers.
func (c *Coordinator) load(partition int32, part *coordinator.Partition) {
	start := time.Now()
	offset, err := coordinator.Replay(part.Log, func(data []byte) (int64, error) {
		return c.applyLoaded(partition, part, data)
	})
	if err != nil {
		c.log.Error("loading transaction state partition; its ids may be incomplete", "partition", partition, "offset", offset, "err", err)
	}
	c.mu.Lock()
	if !c.partitions.StillLedLocked(partition, part) {
		c.mu.Unlock()
		return
	}
	part.Loaded = true
	c.mu.machine.ResumeMarkers(func(id string) bool { return c.PartitionFor(id) == partition })
	d := c.flushLocked()
	c.mu.Unlock()
	c.log.Info("transaction state partition loaded", "partition", partition, "took", time.Since(start))
	c.complete(d)
}

func (c *Coordinator) applyLoaded(partition int32, part *coordinator.Partition, data []byte) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.partitions.StillLedLocked(partition, part) {
		return -1, coordinator.ErrNotLed
	}
	return group.DecodeBatches(data, func(_ int64, key, value []byte) error {
		meta, ok, err := DecodeRecord(key, value)
		if err != nil || !ok {
			return err
		}
		c.mu.machine.ApplyRecord(meta)
		return nil
	})
}

// Resign stops serving a partition; its ids are forgotten here.
func (c *Coordinator) Resign(partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitions.ResignLocked(partition)
	c.mu.machine.DropIDs(func(id string) bool { return c.PartitionFor(id) == partition })
}
