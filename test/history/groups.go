package history

import "sort"

// CommitSource says how a group's committed offset was learnt.
type CommitSource int8

const (
	// CommitRead: an OffsetFetch answer while the group runs. The readings
	// of one group are made by one reader, one after the other, and
	// recorded in that order.
	CommitRead CommitSource = iota
	// CommitAcked: a member's OffsetCommit was acknowledged for the
	// partition.
	CommitAcked
	// CommitFinal: an OffsetFetch after every member of the group stopped;
	// it follows every reading and acknowledgement of the group.
	CommitFinal
)

func (s CommitSource) String() string {
	switch s {
	case CommitAcked:
		return "acknowledged"
	case CommitFinal:
		return "final"
	default:
		return "read"
	}
}

// Commit is one committed offset of a consumer group's partition: the next
// offset the group will read.
type Commit struct {
	Group     string
	Partition int32
	Offset    int64
	Source    CommitSource
}

// CommitRead records a committed offset read while the group runs.
func (h *History) CommitRead(group string, partition int32, offset int64) {
	h.commit(Commit{group, partition, offset, CommitRead})
}

// CommitAcked records that a member's commit of offset was acknowledged.
func (h *History) CommitAcked(group string, partition int32, offset int64) {
	h.commit(Commit{group, partition, offset, CommitAcked})
}

// FinalCommit records the committed offset read after the group stopped.
func (h *History) FinalCommit(group string, partition int32, offset int64) {
	h.commit(Commit{group, partition, offset, CommitFinal})
}

func (h *History) commit(c Commit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.commits = append(h.mu.commits, c)
}

// groupPartition names one partition of one group's view.
type groupPartition struct {
	group     string
	partition int32
}

// checkCommits: a group's committed offset never goes back, neither from
// one reading to the next nor below a commit some member was told
// succeeded (compared with the final reading, once no member commits any
// more). Negative offsets (nothing committed) are ignored.
func (c *checker) checkCommits() {
	last := map[groupPartition]Commit{}
	maxAcked := map[groupPartition]Commit{}
	final := map[groupPartition]Commit{}
	for _, cm := range c.in.Commits {
		if cm.Offset < 0 {
			continue
		}
		key := groupPartition{cm.Group, cm.Partition}
		switch cm.Source {
		case CommitAcked:
			if prev, ok := maxAcked[key]; !ok || cm.Offset > prev.Offset {
				maxAcked[key] = cm
			}
			continue
		case CommitFinal:
			final[key] = cm
		}
		if prev, ok := last[key]; ok && cm.Offset < prev.Offset {
			c.add(OffsetRegression, cm.Partition, cm.Offset, "", "group %s: committed offset %s as %d after it was %s as %d",
				cm.Group, cm.Source, cm.Offset, prev.Source, prev.Offset)
		}
		last[key] = cm
	}
	for _, key := range sortedGroupPartitions(final) {
		if acked, ok := maxAcked[key]; ok && final[key].Offset < acked.Offset {
			c.add(OffsetRegression, key.partition, final[key].Offset, "", "group %s: final committed offset %d is below the acknowledged commit of %d",
				key.group, final[key].Offset, acked.Offset)
		}
	}
}

// checkGroupCoverage: a group reads at least once every record below its
// final committed offset: each record of the final read in [log start,
// final commit) was observed by some session of the group.
func (c *checker) checkGroupCoverage() {
	final := map[groupPartition]int64{}
	for _, cm := range c.in.Commits {
		if cm.Source == CommitFinal {
			final[groupPartition{cm.Group, cm.Partition}] = cm.Offset
		}
	}
	if len(final) == 0 {
		return
	}
	seen := map[groupPartition]map[int64]bool{}
	for _, o := range c.in.Observations {
		if o.Group == "" {
			continue
		}
		key := groupPartition{o.Group, o.Partition}
		if seen[key] == nil {
			seen[key] = map[int64]bool{}
		}
		seen[key][o.Offset] = true
	}
	for _, key := range sortedGroupPartitions(final) {
		for _, r := range c.in.Final[key.partition].Records {
			if r.Offset >= final[key] {
				break
			}
			if r.Offset >= c.logStart(key.partition) && !seen[key][r.Offset] {
				c.add(GroupMissed, key.partition, r.Offset, r.Value, "group %s committed offset %d, but none of its members read this record",
					key.group, final[key])
			}
		}
	}
}

func sortedGroupPartitions[V any](m map[groupPartition]V) []groupPartition {
	out := make([]groupPartition, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].group != out[j].group {
			return out[i].group < out[j].group
		}
		return out[i].partition < out[j].partition
	})
	return out
}
