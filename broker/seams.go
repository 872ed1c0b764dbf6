package broker

// Internal seams between the connection/admin half of the broker and the
// data-path handlers (Produce, Fetch, ListOffsets, DeleteRecords,
// OffsetForLeaderEpoch). Change only by agreement.

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication/replica"
	"github.com/strata-log/strata/tier"
)

// requestContext is what a handler knows about the request beyond its body.
type requestContext struct {
	conn          net.Conn
	clientID      string
	correlationID int32
	// apiKey and version of the request (also available on the kmsg request).
	apiKey  int16
	version int16
	// orderRelease lets the connection's next request start (nil for
	// requests built outside a connection). Call it through releaseOrder
	// (conn.go).
	orderRelease func()
	// Security (issue 9). principal is the connection's authenticated
	// identity in Kafka's form ("User:alice"; "User:ANONYMOUS" before or
	// without authentication); host is the client's IP address (ACL host
	// matching, per-IP limits); listener names the listener the connection
	// arrived on. Set by the connection for every request.
	principal string
	host      string
	listener  string
	// throttleMs is set by a handler whose quota was exceeded (quotas.go):
	// it goes into the response's throttle_time_ms and the connection reads
	// no further request for that long after writing the response.
	throttleMs int32
	// reads holds the pooled buffers of the request's hot segment reads
	// (Fetch); the connection releases them once the response is encoded.
	reads *pooledReads
}

// anonymousPrincipal is the principal of an unauthenticated connection.
const anonymousPrincipal = "User:ANONYMOUS"

// handlerFunc serves one API key. It returns the response to write, or a nil
// response for requests that get none (Produce with acks=0). A non-nil error
// means "close the connection": protocol errors go inside the response.
type handlerFunc func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error)

// partition is one local replica: the log and what the data path needs.
// Owned by the partition manager (partitions.go); handlers only call methods.
type partition struct {
	topic   string
	topicID metadata.TopicID
	index   int32
	log     *hotlog.Log
	// manifest is the broker's tier manifest (never nil); tier_wiring.go
	// derives the partition's global log start from it.
	manifest *tier.Manifest
	// uploadLag is the bytes of sealed segments not yet tiered, as of the
	// uploader's last look (written by the uploader, read by Produce).
	uploadLag atomic.Int64
	// cleaned is the log cleaner's memory of this partition (its
	// checkpoints in the bucket, its totals for metrics and status); only
	// the cleaner writes it.
	cleaned compaction.PartitionState
	// self is this broker's node id (the replica's id).
	self int32
	// replica is the partition's replication state machine and what the
	// shell publishes from it (replication/replica, wired in replica.go).
	// Set at open, never nil.
	replica *replica.Core
	// state (config, leader epoch, ...) lives in partitions.go.
	partitionState
}

// Methods the data path relies on (implemented in partitions.go):
//
//	func (p *partition) highWatermark() int64              // what consumers may read up to (exclusive): the replica's HW
//	func (p *partition) lastStableOffset() int64           // == highWatermark until transactions
//	func (p *partition) leaderEpoch() int32
//	func (p *partition) config() metadata.TopicConfig     // effective configs, updated on alter
//	func (p *partition) changed() <-chan struct{}          // closed when the HW moves
//	func (p *partition) leader() int32                     // this node while its replica leads, else the state's other leader or -1
//	func (p *partition) isLeader() bool                    // the replica leads now (replica.go)
//	func (p *partition) waitHighWatermark(ctx context.Context, offset int64) error // until HW > offset
//	func (p *partition) logStartOffset() int64      // Kafka's log start across both tiers (tier_wiring.go)
//	func (p *partition) localLogStartOffset() int64 // the hot log's start (tier_wiring.go)
//
// Lookups on the partition registry b.parts (partitions.go), returning a Kafka
// error code (0 when found): UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
// NOT_LEADER_OR_FOLLOWER (found only where this node's replica leads).
// Replication (replica*.go): p.replica (a replication/replica.Core)
// drives the partition's replication.Replica through WithReplica;
// p.appendAsLeader appends as leader.
//
//	func (m *partitionManager) lookup(topic string, index int32) (*partition, int16)
//	func (m *partitionManager) lookupByID(id metadata.TopicID, index int32) (*partition, int16)
//	func (m *partitionManager) topicName(id metadata.TopicID) (string, bool)
//	func (m *partitionManager) topicID(name string) (metadata.TopicID, bool)
var _ = context.Background
