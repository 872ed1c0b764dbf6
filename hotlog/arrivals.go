package hotlog

// arrivals is a segment's in-memory sample of when its batches were
// appended: (first offset of a batch, wall clock in ms), at most one per
// second, oldest first. It dates records more closely than the segment's
// first append: a follower's segment may be as old as the partition when
// the follower becomes leader, while the first record it has to upload is
// seconds old. When full, the older half is thinned to every other sample,
// so recent arrivals keep their one-second resolution and the size stays
// bounded. Only the active segment and the newest sealed one keep samples
// (Log.roll drops older ones): those are what an upload is waiting for.
type arrivals struct {
	samples []arrival
}

type arrival struct{ offset, ms int64 }

const (
	maxArrivals      = 64
	arrivalSpacingMs = 1000
)

// sample records a batch at offset appended at nowMs, unless the last
// sample is less than a second older.
func (a *arrivals) sample(offset, nowMs int64) {
	n := len(a.samples)
	if n > 0 && nowMs-a.samples[n-1].ms < arrivalSpacingMs {
		return
	}
	if n == maxArrivals {
		kept := a.samples[:0]
		for i := 0; i < n/2; i += 2 {
			kept = append(kept, a.samples[i])
		}
		a.samples = append(kept, a.samples[n/2:]...)
	}
	a.samples = append(a.samples, arrival{offset: offset, ms: nowMs})
}

// before is the arrival time of the newest sampled batch starting at or
// below offset: the record at offset arrived then or later. ok is false
// when no sample is that old.
func (a *arrivals) before(offset int64) (ms int64, ok bool) {
	for i := len(a.samples) - 1; i >= 0; i-- {
		if a.samples[i].offset <= offset {
			return a.samples[i].ms, true
		}
	}
	return 0, false
}
