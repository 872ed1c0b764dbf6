package txn

import (
	"context"
	"errors"
	"time"

	"github.com/strata-log/strata/broker/group"
)

// appended is one batch appended to a partition, waiting to be durable.
type appended struct {
	log  Log
	base int64
	ids  []string
	ok   bool
}

// delivery is the I/O left after a machine step.
type delivery struct {
	appends []appended
	markers []Markers
}

// persistTimeout bounds the wait for a batch to become durable.
const persistTimeout = 30 * time.Second

// flushLocked drains the machine: one batch per partition. REQUIRES: mu.
func (c *Coordinator) flushLocked() delivery {
	rd := c.mu.machine.Ready()
	d := delivery{markers: rd.Markers}
	byPartition := map[int32][]Record{}
	var order []int32
	for _, r := range rd.Records {
		p := c.PartitionFor(r.ID)
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
	a := appended{}
	grs := make([]group.Record, len(records))
	for i, r := range records {
		a.ids = append(a.ids, r.ID)
		grs[i] = group.Record{Key: r.Key, Value: r.Value}
	}
	sp, ok := c.mu.partitions[partition]
	if !ok {
		return a
	}
	base, err := sp.log.Append(group.EncodeBatch(grs, c.nowMs()))
	if err != nil {
		c.log.Warn("appending to transaction state partition", "partition", partition, "err", err)
		return a
	}
	a.log, a.base, a.ok = sp.log, base, true
	return a
}

// complete waits for d's batches, reports them to the machine, and starts
// the marker jobs that result. It returns the first persistence error.
func (c *Coordinator) complete(d delivery) error {
	var firstErr error
	for _, a := range d.appends {
		err := errors.New("txn: append failed")
		if a.ok {
			ctx, cancel := context.WithTimeout(c.lifetime, persistTimeout)
			err = a.log.WaitDurable(ctx, a.base+int64(len(a.ids))-1)
			cancel()
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
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
	if c.mu.closed || c.mu.markers[job.ID] {
		return
	}
	c.mu.markers[job.ID] = true
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		c.runMarkers(job)
	}()
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
	backoff := c.cfg.MarkerRetryBackoff
	remaining := job
	for {
		c.mu.Lock()
		sp, ok := c.mu.partitions[c.PartitionFor(job.ID)]
		epoch := int32(0)
		if ok {
			epoch = sp.epoch
		}
		c.mu.Unlock()
		if !ok || c.lifetime.Err() != nil {
			return
		}
		if len(remaining.Partitions) > 0 {
			remaining.Partitions = c.sender.SendMarkers(c.lifetime, remaining, epoch)
		}
		if len(remaining.Partitions) == 0 {
			break
		}
		select {
		case <-c.lifetime.Done():
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
func (c *Coordinator) BecomeLeader(partition int32, log Log, leaderEpoch int32) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	if sp, ok := c.mu.partitions[partition]; ok {
		if sp.epoch == leaderEpoch {
			c.mu.Unlock()
			return
		}
		c.resignLocked(partition)
	}
	sp := &statePartition{log: log, epoch: leaderEpoch}
	c.mu.partitions[partition] = sp
	c.mu.Unlock()
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		c.load(partition, sp)
	}()
}

// load replays a partition, marks it loaded and resumes its markers.
func (c *Coordinator) load(partition int32, sp *statePartition) {
	start := time.Now()
	offset, end := sp.log.LogStartOffset(), sp.log.HighWatermark()
	for offset < end {
		data, err := sp.log.Read(offset, 1<<20)
		if err == nil && len(data) == 0 {
			break
		}
		next := int64(-1)
		if err == nil {
			next, err = c.applyLoaded(partition, sp, data)
		}
		if err != nil || next <= offset {
			c.log.Error("loading transaction state partition; its ids may be incomplete", "partition", partition, "offset", offset, "err", err)
			break
		}
		offset = next
	}
	c.mu.Lock()
	if c.mu.partitions[partition] != sp {
		c.mu.Unlock()
		return
	}
	sp.loaded = true
	c.mu.machine.ResumeMarkers(func(id string) bool { return c.PartitionFor(id) == partition })
	d := c.flushLocked()
	c.mu.Unlock()
	c.log.Info("transaction state partition loaded", "partition", partition, "took", time.Since(start))
	c.complete(d)
}

func (c *Coordinator) applyLoaded(partition int32, sp *statePartition, data []byte) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[partition] != sp {
		return -1, ErrNotLeader
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
	c.resignLocked(partition)
}

// resignLocked forgets a partition and its ids. REQUIRES: mu held.
func (c *Coordinator) resignLocked(partition int32) {
	delete(c.mu.partitions, partition)
	c.mu.machine.DropIDs(func(id string) bool { return c.PartitionFor(id) == partition })
}
