package broker

// Partition metrics, the glue that feeds the topic byte counters
// (package traffic) from Produce and Fetch responses, and forwards of the
// counters that the connection server keeps (wire.RequestStats).
// cmd/strata maps the snapshots to Prometheus at scrape time (STYLE.md,
// habit 8), so this package imports no metrics library.

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/traffic"
	"github.com/strata-log/strata/broker/wire"
	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

// APIMetrics is one API key's request counters since the broker started.
type APIMetrics = wire.APIMetrics

// RequestLatencyBuckets returns the upper bounds, in seconds, of the
// buckets of APIMetrics.Buckets (the last bucket, +Inf, is not listed).
func RequestLatencyBuckets() []float64 { return wire.RequestLatencyBuckets() }

// TopicBytes are one topic's record bytes moved by this broker.
type TopicBytes = traffic.TopicBytes

// PartitionMetrics is one hosted partition's replication and log state.
type PartitionMetrics struct {
	Topic     string
	Partition int32
	// Leader: this broker's replica leads the partition. The ISR fields
	// below are known only to the leader (zero otherwise).
	Leader bool
	// UnderReplicated: the ISR is smaller than the replica set;
	// UnderMinISR: smaller than min.insync.replicas.
	UnderReplicated bool
	UnderMinISR     bool
	Replicas        int
	ISRSize         int
	// ISRShrinks and ISRExpands are the ISR changes this replica
	// committed as leader since the partition was opened here.
	ISRShrinks uint64
	ISRExpands uint64
	// LogSizeBytes is the size of the local log's segments (Kafka's
	// kafka.log Size); TieredSizeBytes the bytes of its objects in the
	// bucket (0 when tiering is off).
	LogSizeBytes    int64
	TieredSizeBytes int64
	LogStartOffset  int64 // across both tiers
	LogEndOffset    int64
	HighWatermark   int64
}

// brokerMetrics feeds the topic byte counters from the handlers'
// responses (Produce and Fetch add once per topic of a request).
type brokerMetrics struct {
	traffic.Counters
	// moveBytesOut counts record bytes served as leader to replicas being
	// added by a reassignment.
	moveBytesOut atomic.Uint64
	// moveDurations is the time each completed move this broker led took.
	moveDurations durationHistogram
}

// MoveDurationBuckets are the upper bounds, in seconds, of the move
// duration histogram: a tail-only move takes seconds, a throttled or
// Kafka-sized one hours.
func MoveDurationBuckets() []float64 {
	return []float64{1, 5, 15, 60, 300, 900, 3600, 4 * 3600}
}

// durationHistogram counts durations into MoveDurationBuckets.
type durationHistogram struct {
	mu      sync.Mutex
	buckets []uint64 // cumulative-free counts per bucket, then +Inf
	sum     float64
	count   uint64
}

func (h *durationHistogram) observe(d time.Duration) {
	secs := d.Seconds()
	bounds := MoveDurationBuckets()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buckets == nil {
		h.buckets = make([]uint64, len(bounds)+1)
	}
	i, _ := slices.BinarySearch(bounds, secs)
	h.buckets[i]++
	h.sum += secs
	h.count++
}

// snapshot returns cumulative counts per bound (Prometheus' form), the sum
// and the count.
func (h *durationHistogram) snapshot() (cumulative []uint64, sum float64, count uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cumulative = make([]uint64, len(MoveDurationBuckets()))
	var run uint64
	for i := range cumulative {
		if i < len(h.buckets) {
			run += h.buckets[i]
		}
		cumulative[i] = run
	}
	return cumulative, h.sum, h.count
}

// recordMoveBytes counts the record bytes a follower fetch of replica
// returned for partitions it is being added to, and returns them.
func (m *brokerMetrics) recordMoveBytes(replica int32, slots []fetchSlot, results []fetch.Result) int {
	var n int
	for i, res := range results {
		if i < len(slots) && len(res.Records) > 0 && slots[i].follower != nil &&
			slices.Contains(slots[i].follower.replicatedState().AddingReplicas, replica) {
			n += len(res.Records)
		}
	}
	if n > 0 {
		m.moveBytesOut.Add(uint64(n))
	}
	return n
}

// recordProduceBytes adds, per topic, the record bytes of the partitions
// appended without error. Called before acks=-1 waits: a later timeout
// does not undo the append. topicName resolves the topic ids of v13+
// responses.
func (m *brokerMetrics) recordProduceBytes(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, topicName topicNamer) {
	for ti := range resp.Topics {
		var n int
		for pi, sp := range resp.Topics[ti].Partitions {
			if sp.ErrorCode == 0 && ti < len(req.Topics) && pi < len(req.Topics[ti].Partitions) {
				n += len(req.Topics[ti].Partitions[pi].Records)
			}
		}
		if n == 0 {
			continue
		}
		if name, ok := metricTopicName(resp.Topics[ti].Topic, resp.Topics[ti].TopicID, topicName); ok {
			m.AddIn(name, n)
		}
	}
}

// recordFetchBytes adds, per topic, the record bytes a fetch returns, to
// consumers' or followers' counters.
func (m *brokerMetrics) recordFetchBytes(resp *kmsg.FetchResponse, slots []fetchSlot, results []fetch.Result, topicName topicNamer) {
	sums := make([]int, len(resp.Topics)) // by response topic index
	follower := false
	for i, res := range results {
		if i < len(slots) && len(res.Records) > 0 {
			sums[slots[i].topic] += len(res.Records)
			follower = follower || slots[i].follower != nil
		}
	}
	for ti, n := range sums {
		if n == 0 {
			continue
		}
		name, ok := metricTopicName(resp.Topics[ti].Topic, resp.Topics[ti].TopicID, topicName)
		if !ok {
			continue
		}
		m.AddOut(name, n, follower)
	}
}

// topicNamer resolves a topic id to its name (Broker.topicName).
type topicNamer func(id metadata.TopicID) (string, bool)

// metricTopicName is a response topic's name; v13+ requests carry only
// the topic id.
func metricTopicName(name string, id [16]byte, topicName topicNamer) (string, bool) {
	if name != "" {
		return name, true
	}
	return topicName(id)
}

// RequestMetrics returns the request counters of every API key that has
// served at least one request, in key order.
func (b *Broker) RequestMetrics() []APIMetrics { return b.conns.RequestMetrics() }

// TopicBytes returns the byte counters of every topic that had traffic,
// by name. Topics no longer known to the broker are dropped (a recreated
// topic starts from zero, as a Prometheus counter reset).
func (b *Broker) TopicBytes() []TopicBytes {
	return b.metrics.Snapshot(func(name string) bool {
		_, ok := b.parts.topic(name)
		return ok
	})
}

// PartitionMetrics returns the state of every partition this broker
// hosts, by topic and partition.
func (b *Broker) PartitionMetrics() []PartitionMetrics {
	parts := b.parts.localPartitions()
	out := make([]PartitionMetrics, 0, len(parts))
	for _, p := range parts {
		out = append(out, partitionMetrics(p, b.objects != nil))
	}
	slices.SortFunc(out, func(x, y PartitionMetrics) int {
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		return int(x.Partition) - int(y.Partition)
	})
	return out
}

// partitionMetrics is p's state; tiered: tiering is on, so p's objects in
// the bucket are counted.
func partitionMetrics(p *partition, tiered bool) PartitionMetrics {
	st := p.replicationStatus()
	m := PartitionMetrics{
		Topic: p.topic, Partition: p.index, Leader: st.Role == replication.RoleLeader,
		UnderReplicated: st.UnderReplicated, UnderMinISR: st.UnderMinISR,
		Replicas: len(st.Replicas), ISRSize: len(st.ISR),
		ISRShrinks: st.Counters.ISRShrinks, ISRExpands: st.Counters.ISRExpands,
		LogSizeBytes: p.log.Size(), LogStartOffset: p.logStartOffset(), LogEndOffset: p.log.LogEndOffset(),
		HighWatermark: st.HighWatermark,
	}
	if tiered {
		for _, e := range p.manifest.Segments(p.topicID, p.index) {
			m.TieredSizeBytes += e.Size
		}
	}
	return m
}
