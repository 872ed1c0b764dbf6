package main

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/broker"
)

// brokerMetricsSource is what brokerCollector reads at scrape time
// (*broker.Broker; a fake in tests).
type brokerMetricsSource interface {
	RequestMetrics() []broker.APIMetrics
	TopicBytes() []broker.TopicBytes
	PartitionMetrics() []broker.PartitionMetrics
	ConnStats() broker.ConnStats
	ReplicaStats() broker.ReplicaStats
}

// The broker's Kafka-like metrics. Rates and percentiles are computed by
// the scraper: rate(strata_request_total[1m]) is Kafka's RequestsPerSec,
// histogram_quantile(0.99, rate(strata_request_duration_seconds_bucket[5m]))
// its TotalTimeMs p99.
var (
	requestTotalDesc = prometheus.NewDesc("strata_request_total",
		"Requests served, by API (Kafka's RequestsPerSec).", []string{"api"}, nil)
	requestErrorsDesc = prometheus.NewDesc("strata_request_errors_total",
		"Requests whose handler failed and closed the connection, by API.", []string{"api"}, nil)
	requestDurationDesc = prometheus.NewDesc("strata_request_duration_seconds",
		"Time from a request's dispatch to its encoded response, by API (Kafka's TotalTimeMs); fetch long polls included.",
		[]string{"api"}, nil)
	topicBytesInDesc = prometheus.NewDesc("strata_topic_bytes_in_total",
		"Record-batch bytes appended by produce requests, by topic (Kafka's BytesInPerSec).", []string{"topic"}, nil)
	topicBytesOutDesc = prometheus.NewDesc("strata_topic_bytes_out_total",
		"Record-batch bytes returned to consumers, by topic (Kafka's BytesOutPerSec).", []string{"topic"}, nil)
	topicReplicationBytesOutDesc = prometheus.NewDesc("strata_topic_replication_bytes_out_total",
		"Record-batch bytes returned to followers, by topic (Kafka's ReplicationBytesOutPerSec).", []string{"topic"}, nil)
	underReplicatedDesc = prometheus.NewDesc("strata_under_replicated_partitions",
		"Partitions this broker leads whose ISR is smaller than their replica set.", nil, nil)
	underMinISRDesc = prometheus.NewDesc("strata_under_min_isr_partitions",
		"Partitions this broker leads whose ISR is smaller than min.insync.replicas.", nil, nil)
	leaderCountDesc = prometheus.NewDesc("strata_leader_partitions",
		"Partitions this broker leads (Kafka's LeaderCount).", nil, nil)
	partitionCountDesc = prometheus.NewDesc("strata_partitions",
		"Partitions this broker hosts, as leader or follower (Kafka's PartitionCount).", nil, nil)
	isrShrinksDesc = prometheus.NewDesc("strata_isr_shrinks_total",
		"ISR shrinks committed by this broker as leader, over its hosted partitions.", nil, nil)
	isrExpandsDesc = prometheus.NewDesc("strata_isr_expands_total",
		"ISR expands committed by this broker as leader, over its hosted partitions.", nil, nil)
	partitionUnderReplicatedDesc = prometheus.NewDesc("strata_partition_under_replicated",
		"1 if this broker leads the partition and its ISR is smaller than its replica set, else 0.", []string{"topic", "partition"}, nil)
	partitionISRSizeDesc = prometheus.NewDesc("strata_partition_isr_size",
		"Replicas in the partition's ISR (reported by the leader only).", []string{"topic", "partition"}, nil)
	logSizeDesc = prometheus.NewDesc("strata_log_size_bytes",
		"Bytes of the partition's local log segments (Kafka's kafka.log Size).", []string{"topic", "partition"}, nil)
	tieredLogSizeDesc = prometheus.NewDesc("strata_tiered_log_size_bytes",
		"Bytes of the partition's objects in the bucket.", []string{"topic", "partition"}, nil)
	logStartOffsetDesc = prometheus.NewDesc("strata_log_start_offset",
		"The partition's log start offset across both tiers.", []string{"topic", "partition"}, nil)
	logEndOffsetDesc = prometheus.NewDesc("strata_log_end_offset",
		"The partition's local log end offset.", []string{"topic", "partition"}, nil)
	replicaMissedProgressDesc = prometheus.NewDesc("strata_replica_missed_progress_total",
		"Leader log progress the log watcher did not report to replication within a tick, reported by the tick's safety net instead (should stay 0).",
		nil, nil)
	reassignmentsDesc = prometheus.NewDesc("strata_reassignments_in_progress",
		"Partitions this broker leads that are being reassigned (replicas being added or removed).", nil, nil)
	reassignmentBytesDesc = prometheus.NewDesc("strata_reassignment_bytes_out_total",
		"Record bytes this broker served, as leader, to replicas being added by a reassignment: what moves copy.", nil, nil)
	reassignmentDurationDesc = prometheus.NewDesc("strata_reassignment_duration_seconds",
		"Time from submission to completion of each partition move this broker led when it completed.", nil, nil)
	connectionsDesc = prometheus.NewDesc("strata_connections",
		"Client connections being served.", nil, nil)
	connectionsRefusedDesc = prometheus.NewDesc("strata_connections_refused_total",
		"Connections refused at accept, by the limit reached (max.connections, max.connections.per.ip).", []string{"limit"}, nil)
)

// brokerCollector maps the broker's request, topic and partition
// snapshots to Prometheus at scrape time.
type brokerCollector struct{ src brokerMetricsSource }

func (c brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{requestTotalDesc, requestErrorsDesc, requestDurationDesc,
		topicBytesInDesc, topicBytesOutDesc, topicReplicationBytesOutDesc,
		underReplicatedDesc, underMinISRDesc, leaderCountDesc, partitionCountDesc, isrShrinksDesc, isrExpandsDesc,
		partitionUnderReplicatedDesc, partitionISRSizeDesc, logSizeDesc, tieredLogSizeDesc, logStartOffsetDesc, logEndOffsetDesc,
		replicaMissedProgressDesc, reassignmentsDesc, reassignmentBytesDesc, reassignmentDurationDesc,
		connectionsDesc, connectionsRefusedDesc} {
		ch <- d
	}
}

func (c brokerCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectRequests(ch)
	replicas := c.src.ReplicaStats()
	ch <- prometheus.MustNewConstMetric(replicaMissedProgressDesc, prometheus.CounterValue, float64(replicas.MissedProgress))
	ch <- prometheus.MustNewConstMetric(reassignmentsDesc, prometheus.GaugeValue, float64(replicas.ReassignmentsLed))
	ch <- prometheus.MustNewConstMetric(reassignmentBytesDesc, prometheus.CounterValue, float64(replicas.ReassignmentBytesOut))
	moveBuckets := map[float64]uint64{}
	for i, bound := range broker.MoveDurationBuckets() {
		if i < len(replicas.MoveDurations) {
			moveBuckets[bound] = replicas.MoveDurations[i]
		}
	}
	ch <- prometheus.MustNewConstHistogram(reassignmentDurationDesc, replicas.MoveDurationCount, replicas.MoveDurationSum, moveBuckets)
	conns := c.src.ConnStats()
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(conns.Open))
	ch <- prometheus.MustNewConstMetric(connectionsRefusedDesc, prometheus.CounterValue, float64(conns.RefusedTotal), "total")
	ch <- prometheus.MustNewConstMetric(connectionsRefusedDesc, prometheus.CounterValue, float64(conns.RefusedPerIP), "per_ip")
	for _, t := range c.src.TopicBytes() {
		ch <- prometheus.MustNewConstMetric(topicBytesInDesc, prometheus.CounterValue, float64(t.BytesIn), t.Topic)
		ch <- prometheus.MustNewConstMetric(topicBytesOutDesc, prometheus.CounterValue, float64(t.BytesOut), t.Topic)
		ch <- prometheus.MustNewConstMetric(topicReplicationBytesOutDesc, prometheus.CounterValue, float64(t.ReplicationBytesOut), t.Topic)
	}
	c.collectPartitions(ch)
}

func (c brokerCollector) collectRequests(ch chan<- prometheus.Metric) {
	bounds := broker.RequestLatencyBuckets()
	for _, m := range c.src.RequestMetrics() {
		ch <- prometheus.MustNewConstMetric(requestTotalDesc, prometheus.CounterValue, float64(m.Count), m.Name)
		ch <- prometheus.MustNewConstMetric(requestErrorsDesc, prometheus.CounterValue, float64(m.Errors), m.Name)
		buckets := make(map[float64]uint64, len(bounds))
		for i, bound := range bounds {
			if i < len(m.Buckets) {
				buckets[bound] = m.Buckets[i]
			}
		}
		ch <- prometheus.MustNewConstHistogram(requestDurationDesc, m.Count, m.SumSeconds, buckets, m.Name)
	}
}

// collectPartitions emits the per-partition series and the broker-wide
// sums (under-replicated count, ISR changes).
func (c brokerCollector) collectPartitions(ch chan<- prometheus.Metric) {
	var underReplicated, underMinISR, leaders int
	var shrinks, expands uint64
	parts := c.src.PartitionMetrics()
	for _, p := range parts {
		topic, part := p.Topic, strconv.Itoa(int(p.Partition))
		shrinks += p.ISRShrinks
		expands += p.ISRExpands
		under := 0.0
		if p.Leader {
			leaders++
			if p.UnderReplicated {
				underReplicated++
				under = 1
			}
			if p.UnderMinISR {
				underMinISR++
			}
			ch <- prometheus.MustNewConstMetric(partitionISRSizeDesc, prometheus.GaugeValue, float64(p.ISRSize), topic, part)
		}
		ch <- prometheus.MustNewConstMetric(partitionUnderReplicatedDesc, prometheus.GaugeValue, under, topic, part)
		ch <- prometheus.MustNewConstMetric(logSizeDesc, prometheus.GaugeValue, float64(p.LogSizeBytes), topic, part)
		ch <- prometheus.MustNewConstMetric(tieredLogSizeDesc, prometheus.GaugeValue, float64(p.TieredSizeBytes), topic, part)
		ch <- prometheus.MustNewConstMetric(logStartOffsetDesc, prometheus.GaugeValue, float64(p.LogStartOffset), topic, part)
		ch <- prometheus.MustNewConstMetric(logEndOffsetDesc, prometheus.GaugeValue, float64(p.LogEndOffset), topic, part)
	}
	ch <- prometheus.MustNewConstMetric(underReplicatedDesc, prometheus.GaugeValue, float64(underReplicated))
	ch <- prometheus.MustNewConstMetric(underMinISRDesc, prometheus.GaugeValue, float64(underMinISR))
	ch <- prometheus.MustNewConstMetric(leaderCountDesc, prometheus.GaugeValue, float64(leaders))
	ch <- prometheus.MustNewConstMetric(partitionCountDesc, prometheus.GaugeValue, float64(len(parts)))
	ch <- prometheus.MustNewConstMetric(isrShrinksDesc, prometheus.CounterValue, float64(shrinks))
	ch <- prometheus.MustNewConstMetric(isrExpandsDesc, prometheus.CounterValue, float64(expands))
}

// serveBrokerMetrics publishes the broker's request, topic and partition
// metrics on /metrics.
func (h *httpServer) serveBrokerMetrics(src brokerMetricsSource) {
	if err := h.reg.Register(brokerCollector{src: src}); err != nil {
		h.log.Warn("registering broker metrics", "err", err)
	}
}
