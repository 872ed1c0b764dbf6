package group

import (
	"sync"
	"time"
)

// Records skipped because retention deleted them first: a group whose last
// commit on a partition was below the partition's log start commits an
// offset at or past it. The records between are gone unread (a consumer
// with auto.offset.reset=latest jumps past them without an error). The
// coordinator logs each such commit and counts the records.

// LogStart is what the skip check needs of a partition: its log start and
// the timestamp of the record there (0 if unknown); ok false when this
// broker cannot tell (then no skip is reported).
type LogStart func(topic string, partition int32) (start, startTimestamp int64, ok bool)

// SetLogStart sets where commits learn partitions' log starts. Until it is
// called no skip is detected. It is called without the coordinator's lock.
func (c *Coordinator) SetLogStart(fn LogStart) { c.logStart.Store(&fn) }

// Skipped is the records a group skipped on one partition, since start.
type Skipped struct {
	Group string
	TopicPartition
	Records int64
}

// skippedCounts are the counters behind SkippedRecords.
type skippedCounts struct {
	mu     sync.Mutex
	counts map[skippedKey]int64
}

type skippedKey struct {
	group string
	tp    TopicPartition
}

// SkippedRecords returns the records each group skipped, per partition.
func (c *Coordinator) SkippedRecords() []Skipped {
	c.skipped.mu.Lock()
	defer c.skipped.mu.Unlock()
	out := make([]Skipped, 0, len(c.skipped.counts))
	for k, n := range c.skipped.counts {
		out = append(out, Skipped{Group: k.group, TopicPartition: k.tp, Records: n})
	}
	return out
}

// checkSkipped reports the partitions of a durable commit whose previous
// committed offset (prev) was below the log start while the new one is at
// or past it.
func (c *Coordinator) checkSkipped(in CommitInput, prev map[TopicPartition]Offset) {
	fn := c.logStart.Load()
	if fn == nil || len(prev) == 0 {
		return
	}
	for tp, o := range in.Offsets {
		was, ok := prev[tp]
		if !ok || o.Offset <= was.Offset {
			continue
		}
		start, startTs, ok := (*fn)(tp.Topic, tp.Partition)
		if !ok || was.Offset >= start || o.Offset < start {
			continue
		}
		n := start - was.Offset
		c.countSkipped(in.Group, tp, n)
		args := []any{"group", in.Group, "topic", tp.Topic, "partition", tp.Partition, "records", n,
			"last_committed", was.Offset, "log_start", start, "committed", o.Offset,
			"last_commit_time", time.UnixMilli(was.CommitTimestamp).UTC().Format(time.RFC3339)}
		if startTs > 0 {
			// The lost records were written after the group's last commit
			// (or just before it) and before the record at the log start.
			args = append(args, "log_start_time", time.UnixMilli(startTs).UTC().Format(time.RFC3339),
				"span", time.Duration(max(startTs-was.CommitTimestamp, 0))*time.Millisecond)
		}
		c.log.Warn("consumer group skipped records that retention deleted before it read them", args...)
	}
}

func (c *Coordinator) countSkipped(group string, tp TopicPartition, n int64) {
	c.skipped.mu.Lock()
	defer c.skipped.mu.Unlock()
	if c.skipped.counts == nil {
		c.skipped.counts = map[skippedKey]int64{}
	}
	c.skipped.counts[skippedKey{group, tp}] += n
}
