package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/diskless"
)

// The cost and latency of diskless topics: what the bucket and etcd are
// asked to do per produced byte. PUTs per GiB is
// rate(strata_diskless_puts_total) / rate(strata_diskless_object_bytes_total) × 2^30.
var (
	disklessObjectsDesc = prometheus.NewDesc("strata_diskless_objects_total",
		"Shared objects this broker wrote for diskless topics.", nil, nil)
	disklessObjectBytesDesc = prometheus.NewDesc("strata_diskless_object_bytes_total",
		"Bytes of the shared objects this broker wrote (bytes per object: this over strata_diskless_objects_total).", nil, nil)
	disklessPutsDesc = prometheus.NewDesc("strata_diskless_puts_total",
		"PUTs of shared objects, failed ones included (result=ok|error).", []string{"result"}, nil)
	disklessGetsDesc = prometheus.NewDesc("strata_diskless_gets_total",
		"Whole-object GETs of shared objects for fetches (result=ok|error).", []string{"result"}, nil)
	disklessGetBytesDesc = prometheus.NewDesc("strata_diskless_get_bytes_total",
		"Bytes of shared objects read from the bucket for fetches.", nil, nil)
	disklessCacheHitsDesc = prometheus.NewDesc("strata_diskless_cache_hits_total",
		"Diskless reads served from the shared-object cache without a GET.", nil, nil)
	disklessCommitsDesc = prometheus.NewDesc("strata_diskless_commits_total",
		"etcd commit transactions of diskless batches (result=ok|conflict|error; a conflict lost a race with another broker and was retried; an error failed on etcd, reading the heads or the transaction).",
		[]string{"result"}, nil)
	disklessMergesDesc = prometheus.NewDesc("strata_diskless_merges_total",
		"Per-partition segment objects the merge wrote from diskless runs.", nil, nil)
	disklessMergedBytesDesc = prometheus.NewDesc("strata_diskless_merged_bytes_total",
		"Batch bytes the merge rewrote into segment objects.", nil, nil)
	disklessSweptDesc = prometheus.NewDesc("strata_diskless_swept_objects_total",
		"Shared objects deleted once no run referenced them (merged, or never committed).", nil, nil)
	disklessRetainedDesc = prometheus.NewDesc("strata_diskless_retention_deleted_objects_total",
		"Merged segment objects of diskless partitions removed by retention.ms/bytes.", nil, nil)
	disklessAppendLatencyDesc = prometheus.NewDesc("strata_diskless_append_latency_seconds",
		"From a diskless produce's arrival to its answer: linger, PUT and commit.", nil, nil)
	disklessCommitLatencyDesc = prometheus.NewDesc("strata_diskless_commit_latency_seconds",
		"The etcd part of writing one shared object: every commit transaction, retries included.", nil, nil)
)

// disklessCollector reads the broker's diskless counters at scrape time.
type disklessCollector struct{ stats func() diskless.StatsSnapshot }

func (c disklessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{disklessObjectsDesc, disklessObjectBytesDesc, disklessPutsDesc, disklessGetsDesc,
		disklessGetBytesDesc, disklessCacheHitsDesc, disklessCommitsDesc, disklessMergesDesc, disklessMergedBytesDesc,
		disklessSweptDesc, disklessRetainedDesc, disklessAppendLatencyDesc, disklessCommitLatencyDesc} {
		ch <- d
	}
}

func (c disklessCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(disklessObjectsDesc, s.Objects)
	counter(disklessObjectBytesDesc, s.ObjectBytes)
	counter(disklessPutsDesc, s.Puts-s.PutErrors, "ok")
	counter(disklessPutsDesc, s.PutErrors, "error")
	counter(disklessGetsDesc, s.Gets-s.GetErrors, "ok")
	counter(disklessGetsDesc, s.GetErrors, "error")
	counter(disklessGetBytesDesc, s.GetBytes)
	counter(disklessCacheHitsDesc, s.CacheHits)
	counter(disklessCommitsDesc, s.Commits, "ok")
	counter(disklessCommitsDesc, s.CommitConflicts, "conflict")
	counter(disklessCommitsDesc, s.CommitErrors, "error")
	counter(disklessMergesDesc, s.Merges)
	counter(disklessMergedBytesDesc, s.MergedBytes)
	counter(disklessSweptDesc, s.Swept)
	counter(disklessRetainedDesc, s.Retained)
	histogram := func(d *prometheus.Desc, h diskless.HistogramSnapshot) {
		buckets := map[float64]uint64{}
		for i, bound := range diskless.LatencyBuckets() {
			if i < len(h.Buckets) {
				buckets[bound] = h.Buckets[i]
			}
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
	}
	histogram(disklessAppendLatencyDesc, s.AppendLatency)
	histogram(disklessCommitLatencyDesc, s.CommitLatency)
}
