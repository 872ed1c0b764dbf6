package broker

// Topic and partition metrics, and forwards of the request metrics that
// the connection server keeps (wire.RequestStats). The broker keeps plain
// counters and answers snapshots; cmd/strata maps them to Prometheus at
// scrape time (STYLE.md, habit 8), so this package imports no metrics
// library.
//
// Recording is lock-free: per topic three atomic byte counters found
// through a sync.Map (Produce and Fetch add to them once per topic of a
// request). Snapshots read the atomics one by one, so a snapshot taken
// during traffic may split a request between two scrapes; each counter on
// its own only ever grows.

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

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
type TopicBytes struct {
	Topic string
	// BytesIn is the record-batch bytes of Produce requests appended as
	// leader (Kafka's BytesInPerSec).
	BytesIn uint64
	// BytesOut is the record-batch bytes returned to consumers' fetches
	// (Kafka's BytesOutPerSec); ReplicationBytesOut the same for
	// followers' fetches (ReplicationBytesOutPerSec).
	BytesOut            uint64
	ReplicationBytesOut uint64
}

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

// topicCounters is one topic's byte counters (atomics only).
type topicCounters struct {
	bytesIn, bytesOut, replicationBytesOut atomic.Uint64
}

// brokerMetrics is the broker's topic counters. topics maps a topic name
// to its *topicCounters: entries are added on first traffic and removed by
// TopicBytes once the topic is gone.
type brokerMetrics struct {
	topics sync.Map
}

// topic returns name's counters, adding them on first use.
func (m *brokerMetrics) topic(name string) *topicCounters {
	if c, ok := m.topics.Load(name); ok {
		return c.(*topicCounters)
	}
	c, _ := m.topics.LoadOrStore(name, new(topicCounters))
	return c.(*topicCounters)
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
			m.topic(name).bytesIn.Add(uint64(n))
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
		if c := m.topic(name); follower {
			c.replicationBytesOut.Add(uint64(n))
		} else {
			c.bytesOut.Add(uint64(n))
		}
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
	return b.metrics.topicBytes(func(name string) bool {
		_, ok := b.parts.topic(name)
		return ok
	})
}

// topicBytes snapshots the topic counters by name, dropping those of the
// topics that known reports gone.
func (m *brokerMetrics) topicBytes(known func(topic string) bool) []TopicBytes {
	var out []TopicBytes
	m.topics.Range(func(k, v any) bool {
		name, c := k.(string), v.(*topicCounters)
		if !known(name) {
			m.topics.Delete(name)
			return true
		}
		out = append(out, TopicBytes{Topic: name, BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(),
			ReplicationBytesOut: c.replicationBytesOut.Load()})
		return true
	})
	slices.SortFunc(out, func(x, y TopicBytes) int { return strings.Compare(x.Topic, y.Topic) })
	return out
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
