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
// Security options (TLS, SASL) come from the caller, which knows the
// inter-broker listener's protocol.
package peer
