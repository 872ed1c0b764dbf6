package broker

import "github.com/strata-log/strata/broker/wire"

// ConnStats counts open connections and those refused by the connection
// limits (wire.ConnLimiter; for metrics).
type ConnStats = wire.ConnStats

// ConnStats returns the connection counts.
func (b *Broker) ConnStats() ConnStats {
	return b.connLimits.Stats()
}

// admitConn takes a connection slot for host on the named listener. As in
// Kafka, a separate inter-broker listener is exempt from MaxConnections
// (clients filling the broker must not cut replication off).
func (b *Broker) admitConn(host, listenerName string) bool {
	exempt := len(b.listeners) > 1 && listenerName == b.cfg.interBrokerListener()
	return b.connLimits.Admit(host, exempt)
}
