package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/tier"
)

// maxTierStatusBytes bounds the /v1/tier/status answer `strata tier status` reads.
const maxTierStatusBytes = 64 << 20

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
	h.serveBrokerMetrics(b)
	h.serveLagMetrics(b)
}

// tierStatus answers GET /v1/tier/status[?topic=T] with a JSON array of
// broker.PartitionTierStatus.
func (h *httpServer) tierStatus(w http.ResponseWriter, r *http.Request) {
	src := h.tier.Load()
	if src == nil {
		http.Error(w, "broker not started", http.StatusServiceUnavailable)
		return
	}
	status := src.broker.TierStatus(r.URL.Query().Get("topic"))
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
		if p.Leader {
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

// runTier is `strata tier status [--topic T] [--http host:port]`: per
// partition, the local range, the tiered range, objects and bytes, read
// from the broker's HTTP port.
func runTier(ctx context.Context, c *cli, args []string) error {
	if len(args) > 0 && args[0] == "verify" {
		return runTierVerify(ctx, c, args[1:])
	}
	if len(args) == 0 || args[0] != "status" {
		return usageErrorf("usage: strata tier status [--topic T] [--http host:port] | strata tier verify --object-store URL [--http host:port] [--full]")
	}
	fs := newFlagSet("tier status", c)
	topic := fs.String("topic", "", "only this topic")
	httpAddr := fs.String("http", "127.0.0.1:9644", "the broker's --http `host:port`")
	asJSON := fs.Bool("json", false, "print the broker's JSON as is")
	positional, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return usageErrorf("unexpected arguments %q", positional)
	}
	body, err := fetchTierStatus(ctx, *httpAddr, *topic)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := c.stdout.Write(body)
		return err
	}
	var status []broker.PartitionTierStatus
	if err := json.Unmarshal(body, &status); err != nil {
		return fmt.Errorf("tier status: %w", err)
	}
	if *topic != "" && len(status) == 0 {
		return fmt.Errorf("tier status: no partition of topic %q on this broker", *topic)
	}
	printTierStatus(c.stdout, status)
	return nil
}

func fetchTierStatus(ctx context.Context, addr, topic string) ([]byte, error) {
	return fetchBrokerJSON(ctx, addr, "/v1/tier/status", topic)
}

// fetchBrokerJSON GETs path (with ?topic= when set) from the broker's
// HTTP port, bounded by maxTierStatusBytes.
func fetchBrokerJSON(ctx context.Context, addr, path, topic string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := url.URL{Scheme: "http", Host: addr, Path: path}
	if topic != "" {
		u.RawQuery = url.Values{"topic": {topic}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, usageErrorf("--http %q: %v", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTierStatusBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

func printTierStatus(w io.Writer, status []broker.PartitionTierStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOG-START\tLOCAL-RANGE\tLOCAL-BYTES\tTIERED-RANGE\tOBJECTS\tTIERED-BYTES\tUPLOAD-LAG\tBUCKET-LAG\tHELD\tCLEANED\tDIRTY\tERROR")
	for _, p := range status {
		tiered := "-"
		if p.Tiered {
			tiered = fmt.Sprintf("[%d, %d)", p.TieredStart, p.TieredEnd)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t[%d, %d)\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.LogStartOffset,
			p.LocalStart, p.LocalEnd, p.LocalBytes, tiered, p.Objects, p.TieredBytes, p.UploadLagBytes,
			bucketLagColumn(p), heldColumn(p.Held), cleanedRanges(p), dirtyColumn(p), p.LastError)
	}
	tw.Flush()
}

// bucketLagColumn is how far the bucket is behind a partition this broker
// leads (time, bytes, and the bound), or "-" on a follower, which does not
// upload and cannot tell.
func bucketLagColumn(p broker.PartitionTierStatus) string {
	if !p.Leader {
		return "-"
	}
	bound := "no bound"
	if p.UploadMaxLagMs > 0 {
		bound = "bound " + (time.Duration(p.UploadMaxLagMs) * time.Millisecond).String()
	}
	lag := (time.Duration(p.BucketLagMs) * time.Millisecond).Round(time.Second)
	return fmt.Sprintf("%v %dB (%s)", lag, p.BucketLagBytes, bound)
}

// heldColumn says what the retention hold keeps past retention, and for
// which groups (at their committed offsets).
func heldColumn(h tier.HeldStatus) string {
	if h.Objects == 0 {
		return "-"
	}
	groups := make([]string, len(h.By))
	for i, g := range h.By {
		groups[i] = fmt.Sprintf("%s@%d", g.Group, g.Offset)
	}
	return fmt.Sprintf("%d objects %dB for %s", h.Objects, h.Bytes, strings.Join(groups, ","))
}

// cleanedRanges names the cleaned ranges of a compacted partition.
func cleanedRanges(p broker.PartitionTierStatus) string {
	if !p.Compacted {
		return "-"
	}
	local := fmt.Sprintf("local [%d, %d)", p.LocalStart, max(p.CleanedLocalEnd, p.LocalStart))
	if !p.Tiered {
		return local
	}
	return fmt.Sprintf("tiered [%d, %d) %s", p.TieredStart, p.CleanedTieredEnd, local)
}

func dirtyColumn(p broker.PartitionTierStatus) string {
	if !p.Compacted {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%d B)", 100*p.DirtyRatio, p.DirtyBytes)
}

// boolGauge is a gauge's value for a flag: 1 when set.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
