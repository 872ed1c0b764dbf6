package broker

// The consumer-group coordinator (broker/group) in the broker: its APIs and
// its construction. What it shares with the transaction coordinator
// (its internal topic, leadership hand-off, the log adapter) is in
// coordinator_wiring.go.

import (
	"fmt"
	"net"

	"github.com/strata-log/strata/broker/group"
)

// newCoordinator builds the coordinator from the broker's config.
func (b *Broker) newCoordinator() (*group.Coordinator, error) {
	cfg := b.cfg.Group
	cfg.Logger = b.componentLog("group")
	c, err := group.New(cfg, coordinatorCluster{b}.TopicKnown)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	c.SetTopicMetadata(b.consumerTopicMetadata)
	return c, nil
}

// clientHost is the client's address as Kafka reports it ("/ip").
func clientHost(rc *requestContext) string {
	if rc == nil || rc.conn == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(rc.conn.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return "/" + host
}
