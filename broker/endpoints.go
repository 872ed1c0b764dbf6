package broker

// Per-listener endpoints in answers (issue 9). Handlers name brokers with
// the Host/Port of their registration, the endpoint of each broker's first
// listener. A client connected on another listener must get that
// listener's endpoints (Kafka answers with the endpoints of the listener
// the request arrived on), so the connection rewrites every broker
// endpoint of a response before encoding it. Keeping this at the protocol
// edge leaves the handlers unaware of listeners.

import "github.com/twmb/franz-go/pkg/kmsg"

// rewriteEndpoints replaces the host and port of every broker named in
// resp by that broker's endpoint on the named listener. Nothing to do on
// the first listener, whose endpoints the handlers already used.
func (b *Broker) rewriteEndpoints(listenerName string, resp kmsg.Response) {
	if len(b.listeners) < 2 || listenerName == b.listeners[0].cfg.Name {
		return
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		m := b.endpointMap(listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		m := b.endpointMap(listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		m := b.endpointMap(listenerName)
		m.apply(r.NodeID, &r.Host, &r.Port)
		for i := range r.Coordinators {
			m.apply(r.Coordinators[i].NodeID, &r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.ProduceResponse:
		m := b.endpointMap(listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FetchResponse:
		m := b.endpointMap(listenerName)
		for i := range r.Brokers {
			m.apply(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	}
}

// endpointMap is node id -> the broker's endpoint on one listener.
type endpointMap map[int32]string

func (b *Broker) endpointMap(listenerName string) endpointMap {
	m := endpointMap{}
	for _, info := range b.liveBrks.all() {
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
	if h, p, err := parseHostPort(addr); err == nil {
		*host, *port = h, p
	}
}
