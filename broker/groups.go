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

// groupVersions are the versions of the group APIs: what kmsg knows and
// classic-protocol clients (franz-go, librdkafka 2.x, Java 3.x/4.x) send.
var groupVersions = map[int16][2]int16{
	8:  {0, 9}, // OffsetCommit (v10 addresses topics by id: KIP-848)
	9:  {0, 9}, // OffsetFetch
	10: {0, 6}, // FindCoordinator
	11: {0, 9}, // JoinGroup
	12: {0, 4}, // Heartbeat
	13: {0, 5}, // LeaveGroup
	14: {0, 5}, // SyncGroup
	15: {0, 5}, // DescribeGroups
	16: {0, 5}, // ListGroups
	42: {0, 2}, // DeleteGroups
	47: {0, 0}, // OffsetDelete
	68: {0, 1}, // ConsumerGroupHeartbeat (KIP-848)
	69: {0, 1}, // ConsumerGroupDescribe (KIP-848)
}

// groupHandlers binds the group API handlers.
func groupHandlers(b *Broker) map[int16]handlerFunc {
	return map[int16]handlerFunc{
		8: b.handleOffsetCommit, 9: b.handleOffsetFetch, 10: b.handleFindCoordinator,
		11: b.handleJoinGroup, 12: b.handleHeartbeat, 13: b.handleLeaveGroup, 14: b.handleSyncGroup,
		15: b.handleDescribeGroups, 16: b.handleListGroups, 42: b.handleDeleteGroups, 47: b.handleOffsetDelete,
		68: b.handleConsumerGroupHeartbeat, 69: b.handleConsumerGroupDescribe,
	}
}

// newCoordinator builds the coordinator from the broker's config.
func (b *Broker) newCoordinator() (*group.Coordinator, error) {
	cfg := b.cfg.Group
	cfg.Logger = b.log.With("component", "group")
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
