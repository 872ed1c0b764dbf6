package peer

import (
	"strconv"
	"time"

	"github.com/strata-log/strata/metadata"
)

// Dialer resolves and dials the other brokers of one broker. Its fields
// are set once and read-only afterwards.
type Dialer struct {
	// Overrides replace the registered address of a node (NAT, or a test
	// harness's fault-injecting proxies).
	Overrides map[int32]string
	// Listener names the inter-broker listener; Security is its
	// protocol's client side.
	Listener string
	Security Security
	// Brokers lists the live registrations.
	Brokers func() []metadata.BrokerInfo
}

// Address is where node listens for inter-broker requests: its override,
// else its registered endpoint on Listener; "" while unknown.
func (d Dialer) Address(node int32) string {
	if addr := d.Overrides[node]; addr != "" {
		return addr
	}
	for _, info := range d.Brokers() {
		if info.NodeID == node {
			return info.Endpoint(d.Listener)
		}
	}
	return ""
}

// Dial makes the client for the peer at addr (it connects lazily).
// overhead bounds the wait for each answer beyond the request's own
// timeout: RequestOverhead, or more for requests the peer may hold longer.
// nodeID names the client ("strata-replica-fetcher-<nodeID>").
func (d Dialer) Dial(nodeID int32, addr string, overhead time.Duration) (Client, error) {
	return Dial(Config{
		Addr:     addr,
		ClientID: "strata-replica-fetcher-" + strconv.Itoa(int(nodeID)),
		Overhead: overhead,
		Security: d.Security,
	})
}
