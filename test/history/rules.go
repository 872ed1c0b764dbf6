package history

import (
	"fmt"
	"sort"
	"strings"
)

// checkLost: acknowledged or observed records the final read lacks.
func (c *checker) checkLost() {
	lostValues := map[string]bool{} // each lost record is reported once
	for i := range c.in.Attempts {
		a := &c.in.Attempts[i]
		if !c.acked(a) {
			continue
		}
		found := c.finalPos[a.Value]
		switch {
		case len(found) == 0 && a.Offset >= c.logStart(a.Partition):
			lostValues[a.Value] = true
			c.add(LostWrite, a.Partition, a.Offset, a.Value, "acknowledged to %s, absent from the final read (log start %d, %d records)",
				a.Producer, c.logStart(a.Partition), len(c.in.Final[a.Partition].Records))
		case len(found) > 0 && !containsPos(found, position{a.Partition, a.Offset}):
			c.add(InconsistentOffsets, a.Partition, a.Offset, a.Value, "acknowledged at p%d@%d, final read holds it at %s",
				a.Partition, a.Offset, positionsString(found))
		}
	}
	reported := map[position]bool{}
	for _, o := range c.in.Observations {
		pos := position{o.Partition, o.Offset}
		if _, ok := c.finalAt[pos]; ok || o.Offset < c.logStart(o.Partition) || reported[pos] || lostValues[o.Value] ||
			c.abortedValue(o.Value) { // reported as aborted-read
			continue
		}
		reported[pos] = true
		c.add(LostWrite, o.Partition, o.Offset, o.Value, "seen by session %s, then gone: the final read has no offset %d (log start %d)",
			o.Session, o.Offset, c.logStart(o.Partition))
	}
}

// checkPositions: one position with two values; one value at two positions.
func (c *checker) checkPositions() {
	seen := map[position]map[string]string{} // position -> value -> first source
	note := func(pos position, value, source string) {
		if seen[pos] == nil {
			seen[pos] = map[string]string{}
		}
		if _, ok := seen[pos][value]; !ok {
			seen[pos][value] = source
		}
	}
	at := map[string]map[position]bool{} // value -> positions it was read at
	read := func(pos position, value string) {
		if at[value] == nil {
			at[value] = map[position]bool{}
		}
		at[value][pos] = true
	}
	for _, a := range c.in.Attempts {
		if a.Outcome == Acked {
			note(position{a.Partition, a.Offset}, a.Value, "ack to "+a.Producer)
		}
	}
	for _, o := range c.in.Observations {
		note(position{o.Partition, o.Offset}, o.Value, "session "+o.Session)
		read(position{o.Partition, o.Offset}, o.Value)
	}
	for pos, v := range c.finalAt {
		note(pos, v, "final read")
		read(pos, v)
	}
	for _, pos := range sortedPositions(seen) {
		if values := seen[pos]; len(values) > 1 {
			c.add(InconsistentOffsets, pos.partition, pos.offset, "", "values %s", valuesString(values))
		}
	}
	for value, positions := range at {
		if len(positions) > 1 {
			list := sortedPositions(positions)
			detail := "read at " + positionsString(list)
			if a, ok := c.attempts[value]; ok && a.Outcome == Acked {
				detail += fmt.Sprintf("; acknowledged to %s at p%d@%d", a.Producer, a.Partition, a.Offset)
			}
			c.add(Duplicate, list[0].partition, list[0].offset, value, "%s", detail)
		}
	}
}

// checkSessions: offsets must strictly increase per session and partition,
// and never jump over a record the final read holds.
func (c *checker) checkSessions() {
	finalOffsets := map[int32][]int64{}
	for p, f := range c.in.Final {
		offs := make([]int64, 0, len(f.Records))
		for _, r := range f.Records {
			offs = append(offs, r.Offset)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		finalOffsets[p] = offs
	}
	type sessionPartition struct {
		session   string
		partition int32
	}
	last := map[sessionPartition]int64{}
	for _, o := range c.in.Observations {
		key := sessionPartition{o.Session, o.Partition}
		prev, ok := last[key]
		last[key] = o.Offset
		switch {
		case !ok:
		case o.Offset <= prev:
			c.add(NonmonotonicPoll, o.Partition, o.Offset, o.Value, "session %s polled offset %d after %d", o.Session, o.Offset, prev)
		case o.Offset > prev+1:
			if skipped, ok := firstBetween(finalOffsets[o.Partition], prev, o.Offset); ok {
				c.add(PollSkip, o.Partition, skipped, c.finalAt[position{o.Partition, skipped}],
					"session %s jumped from offset %d to %d over this record", o.Session, prev, o.Offset)
			}
		}
	}
}

// firstBetween returns the first of the sorted offsets in (low, high).
func firstBetween(sorted []int64, low, high int64) (int64, bool) {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i] > low })
	if i < len(sorted) && sorted[i] < high {
		return sorted[i], true
	}
	return 0, false
}

// checkReorder: a producer's acknowledged records of one partition must have
// offsets in the order it produced them.
func (c *checker) checkReorder() {
	type producerPartition struct {
		producer  string
		partition int32
	}
	prev := map[producerPartition]*Attempt{}
	for i := range c.in.Attempts { // Attempts are in Seq order
		a := &c.in.Attempts[i]
		if a.Outcome != Acked {
			continue
		}
		key := producerPartition{a.Producer, a.Partition}
		if p := prev[key]; p != nil && a.Offset < p.Offset {
			c.add(Reorder, a.Partition, a.Offset, a.Value, "produced by %s after %q, which was acknowledged at the later offset %d",
				a.Producer, p.Value, p.Offset)
		}
		if p := prev[key]; p == nil || a.Offset > p.Offset {
			prev[key] = a
		}
	}
}

// checkPhantoms: every record read must come from an attempt not known to
// have failed, nor from an aborted transaction (every read of a history with
// transactions is a read_committed one).
func (c *checker) checkPhantoms() {
	reported := map[string]bool{}
	check := func(p int32, offset int64, value, reader string) {
		if reported[value] {
			return
		}
		a, ok := c.attempts[value]
		switch {
		case !ok:
			c.add(PhantomWrite, p, offset, value, "read by %s, never produced", reader)
		case a.Outcome == Failed:
			c.add(PhantomWrite, p, offset, value, "read by %s, yet its produce attempt by %s was recorded as failed", reader, a.Producer)
		case a.Txn != "" && c.in.Txns[a.Txn] == TxnAborted:
			c.add(AbortedRead, p, offset, value, "read by %s, yet produced by %s in transaction %s, which aborted", reader, a.Producer, a.Txn)
		default:
			return
		}
		reported[value] = true
	}
	for _, o := range c.in.Observations {
		check(o.Partition, o.Offset, o.Value, "session "+o.Session)
	}
	for _, pos := range sortedPositions(c.finalAt) {
		check(pos.partition, pos.offset, c.finalAt[pos], "the final read")
	}
}

func containsPos(list []position, pos position) bool {
	for _, p := range list {
		if p == pos {
			return true
		}
	}
	return false
}

func sortedPositions[V any](m map[position]V) []position {
	out := make([]position, 0, len(m))
	for pos := range m {
		out = append(out, pos)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].partition != out[j].partition {
			return out[i].partition < out[j].partition
		}
		return out[i].offset < out[j].offset
	})
	return out
}

func positionsString(list []position) string {
	parts := make([]string, len(list))
	for i, p := range list {
		parts[i] = fmt.Sprintf("p%d@%d", p.partition, p.offset)
	}
	return strings.Join(parts, ", ")
}

func valuesString(values map[string]string) string {
	keys := make([]string, 0, len(values))
	for v := range values {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, v := range keys {
		parts[i] = fmt.Sprintf("%q (%s)", v, values[v])
	}
	return strings.Join(parts, " vs ")
}
