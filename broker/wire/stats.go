package wire

// Per-API request metrics. The Conn records each request it dispatched
// to a handler once its slot is finished; snapshots read the counters for
// cmd/strata, which maps them to Prometheus at scrape time (STYLE.md,
// habit 8), so this package imports no metrics library.
//
// Recording is lock-free: per API key a fixed array of atomic histogram
// buckets. Snapshots read the atomics one by one, so a snapshot taken
// during traffic may split a request between two scrapes; each counter on
// its own only ever grows.

import (
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestLatencyBounds are the upper bounds, in seconds, of the request
// latency histogram's buckets (an implicit +Inf bucket follows). Fetch
// long polls land in the upper buckets, by design: they are the wait.
var requestLatencyBounds = [...]float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// RequestLatencyBuckets returns the upper bounds, in seconds, of the
// buckets of APIMetrics.Buckets (the last bucket, +Inf, is not listed).
func RequestLatencyBuckets() []float64 { return slices.Clone(requestLatencyBounds[:]) }

// APIMetrics is one API key's request counters since the server started.
type APIMetrics struct {
	APIKey int16
	Name   string // kmsg.NameForKey: "Produce", "Fetch", ...
	// Count is the requests answered (or dropped: acks=0, closed
	// connection); it equals the sum of Buckets.
	Count uint64
	// Errors counts requests whose handler failed or panicked, which
	// closes the connection. Kafka error codes inside a response are not
	// errors here: the request was answered.
	Errors uint64
	// Buckets[i] counts requests that took at most
	// RequestLatencyBuckets()[i] seconds (cumulative, as Prometheus
	// buckets); len(Buckets) == len(RequestLatencyBuckets()).
	Buckets []uint64
	// SumSeconds is the total time of the counted requests, from the
	// request's dispatch (queueing behind an earlier request of its
	// connection included) to its encoded response.
	SumSeconds float64
}

// apiCounters is one API key's histogram. Atomics only: written by every
// handler goroutine, read by snapshots.
type apiCounters struct {
	// buckets[i] counts requests in (bound[i-1], bound[i]]; the last
	// element is the +Inf bucket. Not cumulative (one add per request).
	buckets  [len(requestLatencyBounds) + 1]atomic.Uint64
	errors   atomic.Uint64
	sumNanos atomic.Int64
}

// RequestStats are the request counters of every API key, indexed by key
// (served keys are <= kmsg.MaxKey). The zero value is ready; safe for
// concurrent use.
type RequestStats struct {
	apis [kmsg.MaxKey + 1]apiCounters
}

// Observe records one finished request of apiKey that took took; failed:
// its handler failed, so the connection closes. Keys out of range are
// ignored.
func (m *RequestStats) Observe(apiKey int16, took time.Duration, failed bool) {
	if apiKey < 0 || int(apiKey) >= len(m.apis) {
		return
	}
	c := &m.apis[apiKey]
	i := sort.SearchFloat64s(requestLatencyBounds[:], took.Seconds()) // first bound >= took: Prometheus's le
	c.buckets[i].Add(1)
	c.sumNanos.Add(int64(took))
	if failed {
		c.errors.Add(1)
	}
}

// Snapshot returns the counters of every API key that has served at least
// one request, in key order.
func (m *RequestStats) Snapshot() []APIMetrics {
	var out []APIMetrics
	for key := range m.apis {
		c := &m.apis[key]
		am := APIMetrics{APIKey: int16(key), Name: kmsg.NameForKey(int16(key)), Buckets: make([]uint64, len(requestLatencyBounds))}
		for i := range c.buckets {
			am.Count += c.buckets[i].Load()
			if i < len(am.Buckets) {
				am.Buckets[i] = am.Count
			}
		}
		if am.Count == 0 {
			continue
		}
		am.Errors = c.errors.Load()
		am.SumSeconds = time.Duration(c.sumNanos.Load()).Seconds()
		out = append(out, am)
	}
	return out
}
