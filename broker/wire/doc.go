// Package wire is the Kafka protocol's transport, below the broker's
// handlers: request framing and header parsing, response framing, the
// per-connection response order, the connection limits and the
// broker-wide bound on queued request bytes. It knows nothing of
// partitions or handlers and does not import package broker; the broker's
// connection loop drives it.
//
// # Wire framing
//
// Every request and response is a frame:
//
//	+----------------+------------------------------+
//	| size int32 (BE)| size bytes: header + body    |
//	+----------------+------------------------------+
//
// ReadFrame rejects a request frame whose size is below
// MinRequestHeaderBytes (10) or above the caller's maximum
// (socket.request.max.bytes) before anything is allocated for it; the
// broker then closes the connection.
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
// # Response order
//
// The requests of one connection take effect and are answered in the order
// they were sent, as in Kafka. The reader appends a Slot per request to a
// queue whose capacity bounds the requests in flight; the goroutine serving
// the request fills the slot and calls Finish; WriteInOrder writes the
// frames strictly in queue order, waiting on each slot in turn. Turns
// chains the handlers: each starts only after the previous request
// released its turn, so the reader may read ahead without reordering
// effects. After a throttled response, WriteInOrder sets the connection's
// Mute before the frame leaves, and the reader waits on it before the
// next request (KIP-219).
//
// # Limits
//
// ConnLimiter admits connections at accept (max.connections,
// max.connections.per.ip; a listener may be exempt from the first).
// ByteBudget bounds the bytes of requests read and not yet handled across
// the broker (queued.max.request.bytes): a reader acquires a frame's
// charge before it allocates the frame, and one frame larger than the
// whole budget passes when nothing else is held.
//
// # Buffers
//
// Response frame buffers come from bufpool (GetFrameBuffer, sized by
// ResponseSizeHint) and have one owner at a time: the encoder, then the
// Slot, until WriteInOrder has written the frame and put the buffer back.
package wire
