package broker

import "github.com/strata-log/strata/broker/wire"

// ConnStats counts open connections and those refused by the connection
// limits (wire.ConnLimiter; for metrics).
type ConnStats = wire.ConnStats

// ConnStats returns the connection counts.
func (b *Broker) ConnStats() ConnStats {
	return b.connLimits.Stats()
}

// exemptFromMaxConnections: connections of the named listener skip
// MaxConnections. As in Kafka, a separate inter-broker listener is exempt
// (clients filling the broker must not cut replication off).
func (b *Broker) exemptFromMaxConnections(listenerName string) bool {
	return len(b.listeners) > 1 && listenerName == b.cfg.interBrokerListener()
}
