package cluster

import (
	"fmt"
	"testing"
)

// TestLeadershipReturnsToPreferredReplica: after a failover the restarted
// preferred replica catches up, rejoins the ISR, and the controller's
// periodic rebalance (every 2 s here; Kafka's auto.leader.rebalance) hands
// it its partitions back with a raised epoch.
func TestLeadershipReturnsToPreferredReplica(t *testing.T) {
	defer timed(t, "TestLeadershipReturnsToPreferredReplica")()
	c := Start(t, Config{ExtraArgs: []string{"--leader-imbalance-check-interval", "2s"}})
	const topic = "preferred"
	replicatedTopic(t, c, topic, 3, nil)
	before := mustPartition(t, c, topic, 0)
	preferred := before.Replicas[0]
	if before.Leader != preferred {
		t.Fatalf("a new topic's leader %d is not its preferred replica %d", before.Leader, preferred)
	}
	c.Kill(preferred)
	moved := waitNewLeader(t, c, topic, 0, preferred, before.LeaderEpoch)
	c.Restart(preferred)
	c.WaitFor(fmt.Sprintf("%s-0 led by its preferred replica %d again", topic, preferred), isrTimeout, func() (bool, string) {
		m, err := c.Partition(topic, 0)
		if err != nil {
			return false, err.Error()
		}
		return m.Leader == preferred && m.LeaderEpoch > moved.LeaderEpoch, m.String()
	})
}
