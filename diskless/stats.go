package diskless

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what diskless topics cost: objects and bytes written, PUTs
// and GETs, etcd commits, and latencies. One per broker, shared by its
// Appender and Reader; read with Snapshot (cmd/strata maps it to
// Prometheus).
type Stats struct {
	objects, objectBytes, puts, putErrors  atomic.Int64
	gets, getBytes, getErrors              atomic.Int64
	commits, commitConflicts, commitErrors atomic.Int64
	cacheHits                              atomic.Int64
	merges, mergedBytes, swept, retained   atomic.Int64
	appendLatency, commitLatency           histogram
}

// StatsSnapshot is Stats at one moment.
type StatsSnapshot struct {
	Objects, ObjectBytes, Puts, PutErrors int64
	Gets, GetBytes, GetErrors             int64
	// Commits are successful etcd commit transactions; Conflicts lost a
	// race and were retried; Errors failed on etcd (reading the heads or
	// the transaction).
	Commits, CommitConflicts, CommitErrors int64
	// CacheHits are reads served from the shared-object cache.
	CacheHits int64
	// Merges are segment objects the merge wrote, MergedBytes their
	// batches; Swept are shared objects deleted; Retained are merged
	// objects retention removed from the manifest.
	Merges, MergedBytes, Swept, Retained int64
	// AppendLatency: from a produce's arrival to its answer; CommitLatency:
	// the etcd part of a flush (all its chunks, retries included).
	AppendLatency, CommitLatency HistogramSnapshot
}

// Snapshot reads every counter.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Objects: s.objects.Load(), ObjectBytes: s.objectBytes.Load(), Puts: s.puts.Load(), PutErrors: s.putErrors.Load(),
		Gets: s.gets.Load(), GetBytes: s.getBytes.Load(), GetErrors: s.getErrors.Load(),
		Commits: s.commits.Load(), CommitConflicts: s.commitConflicts.Load(), CommitErrors: s.commitErrors.Load(),
		CacheHits: s.cacheHits.Load(),
		Merges:    s.merges.Load(), MergedBytes: s.mergedBytes.Load(), Swept: s.swept.Load(), Retained: s.retained.Load(),
		AppendLatency: s.appendLatency.snapshot(), CommitLatency: s.commitLatency.snapshot(),
	}
}

// LatencyBuckets are the upper bounds, in seconds, of the latency
// histograms: a diskless produce takes the linger (50-250 ms) plus a PUT
// and a commit.
func LatencyBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10}
}

// HistogramSnapshot is cumulative counts per LatencyBuckets bound.
type HistogramSnapshot struct {
	Buckets []uint64
	Sum     float64
	Count   uint64
}

type histogram struct {
	mu      sync.Mutex
	buckets []uint64 // cumulative at snapshot; per bucket here
	sum     float64
	count   uint64
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buckets == nil {
		h.buckets = make([]uint64, len(LatencyBuckets()))
	}
	for i, bound := range LatencyBuckets() {
		if s <= bound {
			h.buckets[i]++
			break
		}
	}
	h.sum += s
	h.count++
}

func (h *histogram) snapshot() HistogramSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := HistogramSnapshot{Buckets: make([]uint64, len(LatencyBuckets())), Sum: h.sum, Count: h.count}
	var run uint64
	for i := range out.Buckets {
		if i < len(h.buckets) {
			run += h.buckets[i]
		}
		out.Buckets[i] = run
	}
	return out
}
