package txn

import "github.com/twmb/franz-go/pkg/kerr"

// step runs a machine step for id (again, if it stops for a producer id:
// stepLocked) and persists its records. persisted is false when a record
// of the step could not be made durable.
func (c *Coordinator) step(id string, fn func(m *Machine, now int64)) (code int16, persisted bool) {
	c.mu.Lock()
	if code := c.statusLocked(id); code != 0 {
		c.mu.Unlock()
		return code, false
	}
	now := c.nowMs()
	c.stepLocked(func() { fn(c.mu.machine, now) })
	d := c.flushLocked()
	c.mu.Unlock()
	return 0, c.complete(d) == nil
}

// notPersisted: a write failed, most likely because leadership moved; the
// client finds the coordinator again.
var notPersisted = kerr.NotCoordinator.Code

// InitProducerID handles InitProducerId with a transactional id.
func (c *Coordinator) InitProducerID(in InitInput) InitResult {
	var r InitResult
	code, ok := c.step(in.ID, func(m *Machine, now int64) { r = m.InitProducerID(now, in) })
	switch {
	case code != 0:
		return InitResult{Code: code, ProducerID: -1, ProducerEpoch: -1}
	case r.Code == 0 && !ok:
		return InitResult{Code: notPersisted, ProducerID: -1, ProducerEpoch: -1}
	}
	return r
}

// AddPartitions handles AddPartitionsToTxn / AddOffsetsToTxn for one id.
func (c *Coordinator) AddPartitions(in AddInput) (int16, []int16) {
	var top int16
	var per []int16
	code, ok := c.step(in.ID, func(m *Machine, now int64) { top, per = m.AddPartitions(now, in) })
	switch {
	case code != 0:
		return code, nil
	case top == 0 && !ok && !in.VerifyOnly:
		return notPersisted, nil
	}
	return top, per
}

// EndTxn handles EndTxn; it returns once Prepare* is durable.
func (c *Coordinator) EndTxn(in EndInput) EndResult {
	var r EndResult
	code, ok := c.step(in.ID, func(m *Machine, now int64) { r = m.EndTxn(now, in) })
	switch {
	case code != 0:
		return EndResult{Code: code, ProducerID: -1, ProducerEpoch: -1}
	case r.Code == 0 && !ok:
		return EndResult{Code: notPersisted, ProducerID: -1, ProducerEpoch: -1}
	}
	return r
}

// Describe handles DescribeTransactions for one id.
func (c *Coordinator) Describe(id string) (Meta, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.statusLocked(id); code != 0 {
		return Meta{}, code
	}
	meta, ok := c.mu.machine.Describe(id)
	if !ok {
		return Meta{}, codeNotFound
	}
	return meta, 0
}

// List handles ListTransactions: COORDINATOR_LOAD_IN_PROGRESS while a led
// partition loads.
func (c *Coordinator) List(keep func(Meta) bool) ([]Meta, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions.LoadingLocked() {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return c.mu.machine.List(keep), 0
}
