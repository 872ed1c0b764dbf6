package lag

import (
	"math"
	"time"
)

// Rate estimates a partition's recent produce rate in bytes per second from
// samples of its log end offset: records per second (an exponentially
// weighted average over HalfLife) times the log's mean record size. The end
// offset only grows, unlike the log's bytes, which retention shrinks.
type Rate struct {
	// HalfLife is how fast old rates fade: a rate sampled HalfLife ago
	// weighs half as much as one sampled now.
	HalfLife time.Duration

	seen           bool // a sample was taken
	rated          bool // two samples were: recordsPerSec is set
	lastAt         time.Time
	lastEnd        int64
	recordsPerSec  float64
	bytesPerRecord float64
}

// Observe takes a sample: the log end offset, and the log's bytes and
// record count (for the mean record size; records <= 0 keeps the last
// size), at now. It returns the estimate in bytes per second.
func (r *Rate) Observe(now time.Time, logEnd, logBytes, logRecords int64) float64 {
	if logRecords > 0 && logBytes > 0 {
		r.bytesPerRecord = float64(logBytes) / float64(logRecords)
	}
	switch dt := now.Sub(r.lastAt).Seconds(); {
	case !r.seen || logEnd < r.lastEnd: // first sample, or the log was recreated
		r.recordsPerSec, r.rated = 0, false
	case dt <= 0:
		return r.BytesPerSecond()
	default:
		sample := float64(logEnd-r.lastEnd) / dt
		w := 1.0
		if r.rated && r.HalfLife > 0 {
			w = 1 - math.Exp2(-dt/r.HalfLife.Seconds())
		}
		r.recordsPerSec += w * (sample - r.recordsPerSec)
		r.rated = true
	}
	r.seen, r.lastAt, r.lastEnd = true, now, logEnd
	return r.BytesPerSecond()
}

// BytesPerSecond is the current estimate (0 before two samples).
func (r *Rate) BytesPerSecond() float64 { return r.recordsPerSec * r.bytesPerRecord }
