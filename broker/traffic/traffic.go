// Package traffic counts the record bytes each topic moves through one
// broker: appended by Produce as leader (Kafka's BytesInPerSec), returned
// to consumers' fetches (BytesOutPerSec) and to followers' fetches
// (ReplicationBytesOutPerSec). cmd/strata maps the snapshots to Prometheus
// at scrape time (STYLE.md, habit 8), so this package imports no metrics
// library.
//
// Recording is lock-free: per topic three atomic counters found through a
// sync.Map; handlers add to them once per topic of a request. Snapshots
// read the atomics one by one, so a snapshot taken during traffic may
// split a request between two scrapes; each counter on its own only ever
// grows, until its topic is gone (then it starts again from zero, as a
// Prometheus counter reset).
package traffic

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

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

// topicCounters is one topic's byte counters (atomics only).
type topicCounters struct {
	bytesIn, bytesOut, replicationBytesOut atomic.Uint64
}

// Counters are the byte counters of every topic with traffic. topics maps
// a topic name to its *topicCounters: entries are added on first traffic
// and removed by Snapshot once the topic is gone. The zero value is ready;
// safe for concurrent use.
type Counters struct {
	topics sync.Map
}

// topic returns name's counters, adding them on first use.
func (m *Counters) topic(name string) *topicCounters {
	if c, ok := m.topics.Load(name); ok {
		return c.(*topicCounters)
	}
	c, _ := m.topics.LoadOrStore(name, new(topicCounters))
	return c.(*topicCounters)
}

// AddIn counts n record bytes appended to topic by Produce.
func (m *Counters) AddIn(topic string, n int) {
	m.topic(topic).bytesIn.Add(uint64(n))
}

// AddOut counts n record bytes of topic returned by a fetch; replication:
// to a follower.
func (m *Counters) AddOut(topic string, n int, replication bool) {
	if c := m.topic(topic); replication {
		c.replicationBytesOut.Add(uint64(n))
	} else {
		c.bytesOut.Add(uint64(n))
	}
}

// Snapshot returns the counters of every topic that had traffic, by name,
// dropping those of the topics that known reports gone.
func (m *Counters) Snapshot(known func(topic string) bool) []TopicBytes {
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
