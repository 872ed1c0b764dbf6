package listeners

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
)

// RewriteEndpoints replaces the host and port of every broker named in
// resp by that broker's endpoint on the named listener, as registered in
// brokers (called only for responses that name brokers).
func RewriteEndpoints(resp kmsg.Response, listenerName string, brokers func() []metadata.BrokerInfo) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		m := endpointMapOf(brokers(), listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		m := endpointMapOf(brokers(), listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		m := endpointMapOf(brokers(), listenerName)
		m.apply(r.NodeID, &r.Host, &r.Port)
		for i := range r.Coordinators {
			m.apply(r.Coordinators[i].NodeID, &r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.ProduceResponse:
		m := endpointMapOf(brokers(), listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FetchResponse:
		m := endpointMapOf(brokers(), listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	}
}

// endpointMap is node id -> the broker's endpoint on one listener.
type endpointMap map[int32]string

func endpointMapOf(brokers []metadata.BrokerInfo, listenerName string) endpointMap {
	m := endpointMap{}
	for _, info := range brokers {
		if addr, ok := info.Endpoints[listenerName]; ok {
			m[info.NodeID] = addr
		}
	}
	return m
}

// apply sets host and port to node's endpoint, when it has one on the
// listener (brokers without it keep their first listener's endpoint).
func (m endpointMap) apply(node int32, host *string, port *int32) {
	addr, ok := m[node]
	if !ok {
		return
	}
	if h, p, err := SplitHostPort(addr); err == nil {
		*host, *port = h, p
	}
}
