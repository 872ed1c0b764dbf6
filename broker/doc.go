// Package broker is Strata's Kafka front door: the listener, one reader and
// one writer goroutine per connection, request framing, header and body
// decoding with kmsg, the dispatch table (one file per API key, named
// <key>_<api>.go), and the partition manager that mirrors the cluster
// metadata into open local logs.
//
// # Wire framing
//
// Every request and response is a frame:
//
//	+----------------+------------------------------+
//	| size int32 (BE)| size bytes: header + body    |
//	+----------------+------------------------------+
//
// A request frame whose size is below minRequestHeaderBytes (10) or above
// Config.SocketRequestMaxBytes closes the connection before anything is
// allocated for it.
//
// Request header (v1, and v2 for flexible versions of the API):
//
//	api_key int16 | api_version int16 | correlation_id int32 |
//	client_id nullable string (int16 length, -1 = null)      |
//	[v2 only] tagged fields (uvarint count, then per field:
//	          uvarint tag, uvarint size, size bytes)
//
// The body follows and is decoded by the kmsg request type for the key at
// that version. Response header: correlation_id int32, plus an empty tagged
// field section (one 0x00 byte) when the response version is flexible,
// except for ApiVersions, whose response header is always v0 so that a
// client can parse it before it knows which versions the broker speaks.
//
// # Errors
//
// Kafka errors go inside responses. A handler returning a Go error, an
// undecodable request, an unknown API key or an unsupported version (other
// than ApiVersions, which is answered with UNSUPPORTED_VERSION at v0) closes
// the connection, as Kafka does. A panicking handler is recovered, logged,
// and closes its connection only.
//
// # Ordering and concurrency
//
// Handlers of one connection run concurrently (a long-poll Fetch does not
// hold up an ApiVersions), but responses are written strictly in request
// order: the reader appends a slot per request to an ordered queue and the
// writer waits on each slot in turn. Produce requests with acks=0 still take
// a slot (so ordering stays right) but the slot carries no bytes. Produce
// requests of one connection start one at a time, in order, so pipelined
// batches to the same partition are appended in the order they were sent;
// a Produce handler may release the next one early with
// requestContext.releaseOrder once its appends are done.
//
// The queue's capacity (Config.MaxInFlightRequests) bounds the requests in
// flight per connection: the reader stops reading while it is full.
//
// # Partition manager
//
// The broker keeps an in-memory mirror of every topic in metadata (topic,
// partition states) and an open hotlog.Log for every partition whose replica
// list holds this node, in <DataDir>/<topic>-<partition>/. Each such
// directory also holds partition.metadata (as Kafka):
//
//	version: 0
//	topic_id: <topic id, base64 URL encoding without padding>
//
// so that a directory left by a deleted topic is never served as a new topic
// of the same name: on start, directories of topics not in metadata, or
// whose topic id differs, are deleted.
//
// The mirror is updated by the metadata watch and, for read-your-writes, by
// the admin handlers right after their own etcd write; updates are
// idempotent and ordered by the topic's etcd revision, and topic ids deleted
// by this broker are remembered so a late watch event cannot resurrect them.
//
// Lock order: Broker.parts.mu before partitionState.mu. Neither is held
// across etcd calls or log I/O other than Open/Close/Reconfigure of a log
// in the manager.
//
// # Consumer groups
//
// The group APIs (08-16, 42, 47) are thin: they translate kmsg requests for
// the coordinator in broker/group, which owns the protocol and the records
// in __consumer_offsets (see its doc.go). groups.go wires it in: the
// partition manager tells it which partitions of __consumer_offsets this
// node leads (BecomeLeader/Resign, on open and on every partition state
// change), an offsetsLog adapter gives it those partitions' logs, deleted
// topics lose their offsets, and FindCoordinator creates the topic on first
// use. Shutdown resigns the coordinator before draining connections, so a
// JoinGroup waiting for a rebalance does not hold up the drain.
//
// Full lock order: Broker.parts.mu → the coordinator's lock →
// partitionState.mu and the hotlog's locks. The coordinator never calls
// into the broker while holding its lock.
package broker
