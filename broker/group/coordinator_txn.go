package group

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrFenced is wrapped by an offsets partition's Append when the partition
// refuses a transactional batch for its producer epoch (a newer epoch
// exists).
var ErrFenced = errors.New("group: producer fenced")

// TxnSequencer is implemented by an offsets partition's log that checks
// producer sequences (the broker's partitions): the first sequence for the
// next transactional batch of the producer at epoch. Without it, 0 is
// used.
type TxnSequencer interface {
	NextSequence(producerID int64, epoch int16) int32
}

// TxnCommit handles a TxnOffsetCommit's group part: the offsets are written
// as a transactional batch of the producer and stay pending until its
// marker (CompleteTxn). It returns once the batch is durable (0) or with
// the error code for every partition.
func (c *Coordinator) TxnCommit(ctx context.Context, in TxnCommitInput) int16 {
	c.mu.Lock()
	if code := c.statusLocked(in.Group); code != 0 {
		c.mu.Unlock()
		return code
	}
	checked, cc := c.consumerCommitCheckLocked(CommitInput{Group: in.Group, Generation: in.Generation, Member: in.Member,
		Offsets: in.Offsets})
	if cc == kerr.StaleMemberEpoch.Code {
		cc = kerr.IllegalGeneration.Code // TxnOffsetCommit has no STALE_MEMBER_EPOCH (Kafka answers this)
	}
	if cc != 0 {
		c.mu.Unlock()
		return cc
	}
	in.Generation, in.Member = checked.Generation, checked.Member // a consumer group's member: checked here
	now := c.nowMs()
	code, records := c.mu.machine.TxnCommit(now, in)
	if code != 0 || len(records) == 0 {
		c.mu.Unlock()
		return code
	}
	partition := c.PartitionFor(in.Group)
	op, _ := c.partitions.LookupLocked(partition) // led: statusLocked was 0
	seq := int32(0)
	if s, ok := op.Log.(TxnSequencer); ok {
		seq = s.NextSequence(in.ProducerID, in.ProducerEpoch)
	}
	batch := EncodeTxnBatch(records, now, in.ProducerID, in.ProducerEpoch, seq)
	a, err := c.partitions.AppendLocked(partition, batch, len(records))
	if err == nil {
		for i, r := range records {
			_ = c.mu.machine.AddPendingTxn(now, in.ProducerID, a.Base+int64(i), r)
		}
	}
	c.mu.Unlock()
	switch {
	case errors.Is(err, ErrFenced):
		return kerr.ProducerFenced.Code
	case err != nil:
		c.log.Warn("appending transactional offset commit", "group", in.Group, "err", err)
		return kerr.NotCoordinator.Code
	}
	if err := a.Wait(ctx); err != nil {
		c.log.Warn("transactional offset commit not persisted", "group", in.Group, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// CompleteTxn is called by the partition side after appending producerID's
// transaction marker to partition of __consumer_offsets: the producer's
// pending offsets of that partition's groups are applied (commit) or
// dropped. A partition not led here is ignored (its next leader finds the
// marker on load).
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.partitions.LookupLocked(partition); !ok {
		return
	}
	c.mu.machine.CompleteTxn(c.nowMs(), producerID, commit, func(g string) bool { return c.PartitionFor(g) == partition })
}

// Unstable lists group's partitions with a pending transactional commit.
func (c *Coordinator) Unstable(group string) map[TopicPartition]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.machine.Unstable(group)
}
