package hotlog

// epochCache is the in-memory leader-epoch checkpoint. Owned by Log.mu.
// Invariant: entries increase strictly in Epoch and in StartOffset, and every
// StartOffset is < the LEO.
type epochCache struct {
	entries []epochEntry
}

// latest returns the newest epoch, or -1.
func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// assign records that epoch starts at offset; it reports whether anything
// changed. Older or equal epochs are ignored (the batch belongs to the
// current entry). REQUIRES: offset >= every existing StartOffset.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if epoch < 0 || epoch <= c.latest() {
		return false
	}
	// Drop entries that a newer epoch overrides at the same offset.
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, epochEntry{Epoch: epoch, StartOffset: offset})
	return true
}

// truncateFromEnd drops entries starting at or after offset (the new LEO).
func (c *epochCache) truncateFromEnd(offset int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries wholly below offset (the new log start)
// and moves the entry covering offset up to start there, as Kafka does.
func (c *epochCache) truncateFromStart(offset int64) bool {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= offset {
		i++
	}
	changed := i > 0
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].StartOffset < offset {
		c.entries[0].StartOffset = offset
		changed = true
	}
	return changed
}

// endOffsetFor answers OffsetForLeaderEpoch exactly as Kafka's
// LeaderEpochFileCache.endOffsetFor:
//   - the latest epoch: (epoch, LEO);
//   - an epoch newer than all known, or no entries: (-1, -1);
//   - an epoch older than all known: (epoch, first entry's start offset);
//   - otherwise: (largest known epoch <= epoch, start offset of the next one).
func (c *epochCache) endOffsetFor(epoch int32, logEndOffset int64) (int32, int64) {
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if epoch == c.latest() {
		return epoch, logEndOffset
	}
	higher := -1
	for i, e := range c.entries {
		if e.Epoch > epoch {
			higher = i
			break
		}
	}
	switch {
	case higher < 0:
		return -1, -1
	case higher == 0:
		return epoch, c.entries[0].StartOffset
	default:
		return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
	}
}

func (c *epochCache) clone() []epochEntry { return append([]epochEntry(nil), c.entries...) }
