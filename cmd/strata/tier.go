package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/tier"
)

// maxTierStatusBytes bounds a /v1/tier/status answer read from a broker.
const maxTierStatusBytes = 64 << 20

// The scopes of /v1/tier/status.
const (
	tierScopeBroker  = "broker"  // this broker's partitions (the default)
	tierScopeCluster = "cluster" // every live broker's (tier_cluster.go)
)

// tierSource is what the HTTP server reads tier status and metrics from.
type tierSource struct {
	broker *broker.Broker
	bucket *tier.Bucket
}

// serveTier publishes the broker's tier status on /v1/tier/status and its
// tiering, object-store and cold reader counters and its request, topic and
// partition metrics (metrics.go) on /metrics.
func (h *httpServer) serveTier(b *broker.Broker, bucket *tier.Bucket) {
	src := &tierSource{broker: b, bucket: bucket}
	h.tier.Store(src)
	if err := h.reg.Register(&tierCollector{src: src}); err != nil {
		h.log.Warn("registering tier metrics", "err", err)
	}
	h.serveCold(b.ColdStats)
	if err := h.reg.Register(disklessCollector{stats: b.DisklessStats}); err != nil {
		h.log.Warn("registering diskless metrics", "err", err)
	}
	h.serveBrokerMetrics(b)
	h.serveLagMetrics(b)
}

// tierStatus answers GET /v1/tier/status[?topic=T][&scope=broker|cluster]:
// by default (scope=broker) a JSON array of broker.PartitionTierStatus, one
// per partition this broker holds a replica of (led or followed); with scope=cluster every live broker's rows
// (tier_cluster.go).
func (h *httpServer) tierStatus(w http.ResponseWriter, r *http.Request) {
	src := h.tier.Load()
	if src == nil {
		http.Error(w, "broker not started", http.StatusServiceUnavailable)
		return
	}
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", tierScopeBroker:
	case tierScopeCluster:
		serveClusterTierStatus(w, r, src.broker)
		return
	default:
		http.Error(w, fmt.Sprintf("scope %q: want broker or cluster", scope), http.StatusBadRequest)
		return
	}
	status := src.broker.ReplicaTierStatus(r.URL.Query().Get("topic"))
	if status == nil {
		status = []broker.PartitionTierStatus{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(status)
}

// tierManifest answers GET /v1/tier/manifest with broker.TierManifestView.
func (h *httpServer) tierManifest(w http.ResponseWriter, _ *http.Request) {
	src := h.tier.Load()
	if src == nil {
		http.Error(w, "broker not started", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(src.broker.TierManifest())
}

var (
	tierCounterDesc = prometheus.NewDesc("strata_tier_events_total",
		"Tiering events by kind (segments_uploaded, upload_failures, local_segments_freed, ...).", []string{"event"}, nil)
	tierBytesDesc = prometheus.NewDesc("strata_tier_uploaded_bytes_total",
		"Object bytes of segments committed to the tier manifest.", nil, nil)
	tierLagDesc = prometheus.NewDesc("strata_tier_upload_lag_bytes",
		"Bytes of sealed segments not yet in the bucket, per partition.", []string{"topic", "partition"}, nil)
	bucketLagDesc = prometheus.NewDesc("strata_tier_bucket_lag_seconds",
		"Age of the oldest committed record not yet in the bucket, per partition this broker leads (0: the bucket is current).",
		[]string{"topic", "partition"}, nil)
	heldObjectsDesc = prometheus.NewDesc("strata_tier_retention_held_objects",
		"Objects past retention that the retention hold keeps in the bucket for consumer groups, per partition this broker leads.",
		[]string{"topic", "partition"}, nil)
	heldBytesDesc = prometheus.NewDesc("strata_tier_retention_held_bytes",
		"Bytes of the objects the retention hold keeps, per partition this broker leads.", []string{"topic", "partition"}, nil)
	heldGroupDesc = prometheus.NewDesc("strata_tier_retention_holding_group",
		"1 for each consumer group whose committed offset holds objects past retention, per partition this broker leads (only while it holds some).",
		[]string{"topic", "partition", "group"}, nil)
	bucketLagMaxDesc = prometheus.NewDesc("strata_tier_bucket_lag_seconds_max",
		"strata_tier_bucket_lag_seconds's largest value over the partitions this broker leads.", nil, nil)
	objRequestsDesc = prometheus.NewDesc("strata_object_store_requests_total",
		"Object-store requests by operation and topic (every attempt).", []string{"op", "topic"}, nil)
	objErrorsDesc = prometheus.NewDesc("strata_object_store_errors_total",
		"Object-store requests that failed, by operation and topic.", []string{"op", "topic"}, nil)
	objBytesDesc = prometheus.NewDesc("strata_object_store_bytes_total",
		"Object-store body bytes moved, by operation and topic.", []string{"op", "topic"}, nil)
	cleanerDirtyRatioDesc = prometheus.NewDesc("strata_cleaner_dirty_ratio",
		"Dirty bytes / cleanable bytes of a compacted partition (local and tiered).", []string{"topic", "partition"}, nil)
	cleanerDirtyBytesDesc = prometheus.NewDesc("strata_cleaner_dirty_bytes",
		"Cleaner lag: bytes of a compacted partition not yet cleaned.", []string{"topic", "partition"}, nil)
	cleanerBytesDesc = prometheus.NewDesc("strata_cleaner_bytes_total",
		"Bytes the cleaner read (in) and wrote (out) for a partition.", []string{"topic", "partition", "direction"}, nil)
	cleanerUncleanableDesc = prometheus.NewDesc("strata_cleaner_uncleanable",
		"1 when the cleaner gave up on a compacted partition's local log until restart (a pass failed for good; the log says why).",
		[]string{"topic", "partition"}, nil)
)

// tierCollector maps the broker's snapshots to Prometheus at scrape time.
type tierCollector struct{ src *tierSource }

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tierCounterDesc, tierBytesDesc, tierLagDesc, bucketLagDesc, bucketLagMaxDesc,
		heldObjectsDesc, heldBytesDesc, heldGroupDesc, objRequestsDesc, objErrorsDesc, objBytesDesc,
		cleanerDirtyRatioDesc, cleanerDirtyBytesDesc, cleanerBytesDesc, cleanerUncleanableDesc} {
		ch <- d
	}
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.src.broker.TierCounters()
	for name, v := range map[string]int64{
		"segments_uploaded": t.SegmentsUploaded, "upload_failures": t.UploadFailures,
		"local_segments_freed": t.LocalSegmentsFreed, "remote_entries_removed": t.RemoteEntriesGone,
		"objects_deleted": t.ObjectsDeleted, "orphans_deleted": t.OrphansDeleted, "produces_throttled": t.ThrottledProduces,
		"segments_rolled_for_bound": t.BoundRolls,
		"merge_passes":              t.MergePasses, "objects_merged_in": t.MergeObjectsIn, "objects_merged_out": t.MergeObjectsOut,
		"retention_hold_read_failures": t.RetentionHoldReadFailures,
	} {
		ch <- prometheus.MustNewConstMetric(tierCounterDesc, prometheus.CounterValue, float64(v), name)
	}
	ch <- prometheus.MustNewConstMetric(tierBytesDesc, prometheus.CounterValue, float64(t.BytesUploaded))
	var maxBucketLag float64
	for _, p := range c.src.broker.TierStatus("") {
		part := fmt.Sprint(p.Partition)
		ch <- prometheus.MustNewConstMetric(tierLagDesc, prometheus.GaugeValue, float64(p.UploadLagBytes), p.Topic, part)
		if p.Leader && p.RemoteStorage {
			lag := float64(p.BucketLagMs) / 1000
			maxBucketLag = max(maxBucketLag, lag)
			ch <- prometheus.MustNewConstMetric(bucketLagDesc, prometheus.GaugeValue, lag, p.Topic, part)
			ch <- prometheus.MustNewConstMetric(heldObjectsDesc, prometheus.GaugeValue, float64(p.Held.Objects), p.Topic, part)
			ch <- prometheus.MustNewConstMetric(heldBytesDesc, prometheus.GaugeValue, float64(p.Held.Bytes), p.Topic, part)
			for _, g := range p.Held.By {
				ch <- prometheus.MustNewConstMetric(heldGroupDesc, prometheus.GaugeValue, 1, p.Topic, part, g.Group)
			}
		}
		if p.Compacted {
			ch <- prometheus.MustNewConstMetric(cleanerDirtyRatioDesc, prometheus.GaugeValue, p.DirtyRatio, p.Topic, part)
			ch <- prometheus.MustNewConstMetric(cleanerDirtyBytesDesc, prometheus.GaugeValue, float64(p.DirtyBytes), p.Topic, part)
			ch <- prometheus.MustNewConstMetric(cleanerBytesDesc, prometheus.CounterValue, float64(p.CleanedBytesIn), p.Topic, part, "in")
			ch <- prometheus.MustNewConstMetric(cleanerBytesDesc, prometheus.CounterValue, float64(p.CleanedBytesOut), p.Topic, part, "out")
			ch <- prometheus.MustNewConstMetric(cleanerUncleanableDesc, prometheus.GaugeValue, boolGauge(p.Uncleanable), p.Topic, part)
		}
	}
	ch <- prometheus.MustNewConstMetric(bucketLagMaxDesc, prometheus.GaugeValue, maxBucketLag)
	if c.src.bucket == nil || c.src.bucket.Counts == nil {
		return
	}
	for k, v := range c.src.bucket.Counts.Snapshot() {
		op := string(k.Op)
		ch <- prometheus.MustNewConstMetric(objRequestsDesc, prometheus.CounterValue, float64(v.Requests), op, k.Topic)
		ch <- prometheus.MustNewConstMetric(objErrorsDesc, prometheus.CounterValue, float64(v.Errors), op, k.Topic)
		ch <- prometheus.MustNewConstMetric(objBytesDesc, prometheus.CounterValue, float64(v.Bytes), op, k.Topic)
	}
}

// boolGauge is a gauge's value for a flag: 1 when set.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
