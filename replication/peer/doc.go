// Package peer is the client one broker uses to send requests to another:
// a follower's Fetch, OffsetForLeaderEpoch and ListOffsets to its leader
// (package replication/follower), and a transaction coordinator's
// WriteTxnMarkers to partition leaders.
//
// A Client talks to exactly one broker, the one it was dialled for: no
// metadata requests and no routing. The real one is a franz-go client
// whose single seed broker is addressed directly (ApiVersions are
// negotiated by franz-go on connect; it connects lazily, at the first
// request). Tests use scripted fakes of the two-method Client interface.
//
// A Dialer resolves a node id to the address of its inter-broker
// listener (an override, else its registration) and dials it with that
// listener's Security (TLS, SASL), which the caller configures.
package peer
