package quota

// Client quota math, pure: no clock, no locks. Callers pass the
// time in milliseconds of a monotonic clock.
//
// A rate is measured as Kafka's ClientQuotaManager measures it: a sampled
// stat of quota.window.num (11) samples of quota.window.size.seconds (1 s)
// each. A sample starts at the first record after the previous one's
// window ended; samples that started more than 11 windows ago are
// obsolete and count for nothing. The rate is the total of the live
// samples divided by the time since the oldest live sample started.
//
// Deviation from Kafka: Kafka floors that time at (samples-1) windows,
// which lets a new client send 10 s worth of its quota at once before it
// is throttled, so over its first half-minute a greedy client achieves
// about a third more than its quota. Strata floors it at one window: a
// client gets at most one window's worth of burst, and its long-run rate
// matches the quota from its first second (within 10% over 30 s for a
// greedy client that waits out every throttle).
//
// Throttle time (Kafka's QuotaUtils.throttleTime): with total T over time
// W and quota Q per second, the rate T/W exceeds Q by (T - Q·W); with no
// further records the rate is back at Q after (T - Q·W)/Q seconds, which
// is the throttle. It is capped at the whole measured span (11 windows):
// by then every sample counted has expired.

const (
	// windowSamples is quota.window.num.
	windowSamples = 11
	// windowMs is quota.window.size.seconds, in milliseconds.
	windowMs = 1000
	// maxThrottleMs caps one throttle: after that long every sample
	// that led to it is obsolete.
	maxThrottleMs = windowSamples * windowMs
)

// sample is one window of a rateWindow.
type sample struct {
	startMs int64
	total   float64
}

// rateWindow is the sampled stat of one quota sensor. The zero value is
// empty. Not safe for concurrent use: its owner (Manager) locks.
type rateWindow struct {
	samples [windowSamples]sample
	// current indexes the newest sample; used counts samples started so
	// far (at most windowSamples).
	current, used int
	// lastMs is the time of the latest record (idle sensors are dropped).
	lastMs int64
}

// record adds v at nowMs, starting a new sample when the current one's
// window has passed (the oldest sample is reused).
func (w *rateWindow) record(nowMs int64, v float64) {
	switch {
	case w.used == 0:
		w.used, w.current = 1, 0
		w.samples[0] = sample{startMs: nowMs}
	case nowMs-w.samples[w.current].startMs >= windowMs:
		w.current = (w.current + 1) % windowSamples
		w.used = min(w.used+1, windowSamples)
		w.samples[w.current] = sample{startMs: nowMs}
	}
	w.samples[w.current].total += v
	w.lastMs = max(w.lastMs, nowMs)
}

// measure returns the total of the live samples and the time they span
// in milliseconds (at least one window).
func (w *rateWindow) measure(nowMs int64) (total float64, spanMs int64) {
	oldest := nowMs
	for i := 0; i < w.used; i++ {
		s := w.samples[i]
		if nowMs-s.startMs >= maxThrottleMs {
			continue // obsolete
		}
		total += s.total
		oldest = min(oldest, s.startMs)
	}
	return total, max(nowMs-oldest, windowMs)
}

// rate is the measured rate per second at nowMs.
func (w *rateWindow) rate(nowMs int64) float64 {
	total, spanMs := w.measure(nowMs)
	return total * 1000 / float64(spanMs)
}

// throttleMs is how long, from nowMs, until the rate is back at quota
// (per second) with nothing more recorded; 0 when it is not above it.
func (w *rateWindow) throttleMs(nowMs int64, quota float64) int32 {
	if quota <= 0 {
		return 0
	}
	total, spanMs := w.measure(nowMs)
	excess := total - quota*float64(spanMs)/1000
	if excess <= 0 {
		return 0
	}
	ms := excess / quota * 1000
	if ms >= maxThrottleMs {
		return maxThrottleMs
	}
	return int32(ms)
}

// idle reports whether nothing recorded in w is still live at nowMs: the
// sensor can be forgotten without changing any answer.
func (w *rateWindow) idle(nowMs int64) bool {
	return w.used == 0 || nowMs-w.lastMs >= maxThrottleMs
}
