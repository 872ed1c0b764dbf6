// Package wire is the Kafka protocol's transport, below the broker's
// handlers: request framing and header parsing, response framing, the
// connection loop and its per-connection response order, the connection
// limits, the broker-wide bound on queued request bytes, and the per-API
// request metrics. It knows nothing of partitions or handlers and does not
// import package broker: the broker supplies a Session per connection.
//
// # Connections
//
// Server accepts a listener's connections (Accept), admits each within the
// ConnLimiter, runs its TLS handshake if the Listener has a TLS
// configuration, and asks the Listener's NewSession for the broker's side
// of the connection. A Conn then runs two goroutines:
//
//   - the reader reads a frame once the ByteBudget has room for it,
//     decodes it (DecodeRequest against ServerConfig.Versions), and asks
//     the Session how to serve it (Route): refuse it (close), answer it
//     inline before reading on (SASL, whose answer changes what is read
//     next, and the ApiVersions fallback), or start a Handler on its own
//     goroutine, chained behind the previous request's turn (Turns). While
//     the Session wants raw SASL tokens (RawTokenLimit > 0) the reader reads
//     those instead of requests;
//   - the answers leave in request order (Responses): the goroutine that
//     finishes the oldest unanswered request writes it and the finished ones
//     after it in one vectored write, with no writer goroutine to wake; the
//     connection closes when a slot asks to, a write fails, or the reader
//     has ended and every answer is out.
//
// Every Session method is called by the reader only, so the Session's
// state (its identity) needs no lock. A Handler's error or panic closes
// its connection only, after the answers before it. Drain stops every
// reader (a read deadline in the past) and waits for the requests in
// flight to be answered until its context ends; then it cancels the
// handlers' context and closes what is left. Close cancels the handlers
// and waits for them, boundedly.
//
// Lock order: Server.mu, then ConnLimiter.mu. Conn fields are owned as
// stated on the type.
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
// they were sent, as in Kafka. The reader takes a Slot per request from
// the connection's Responses (at most MaxInFlightRequests unanswered); the
// goroutine serving the request fills the slot and calls Finish. Frames
// leave strictly in slot order: Finish of the oldest unanswered slot
// writes it and every finished slot after it, on the finishing goroutine,
// while a goroutine is writing the others only mark theirs finished (it
// writes them before it stops). Turns chains the handlers: each starts only
// after the previous request released its turn, so the reader may read
// ahead without reordering effects. After a throttled response, the writer
// sets the connection's Mute before the frame leaves, and the reader waits
// on it before the next request (KIP-219).
//
// # Limits
//
// ConnLimiter admits connections at accept (max.connections,
// max.connections.per.ip; a listener may be exempt from the first).
// ByteBudget bounds the bytes of requests read and not yet handled across
// the broker (queued.max.request.bytes): a reader acquires a frame's
// charge before it allocates the frame, and one frame larger than the
// whole budget passes when nothing else is held. The charge is 64 bytes
// per frame byte while the frame is decoded (a request of many tiny array
// elements decodes to tens of times its size); a decoded Produce, whose
// records stay in the frame, then holds its frame size only, other
// requests the whole charge, until their handler ends.
//
// # SASL
//
// A SASLSession is one connection's identity and the Kafka side of its
// SASL authentication, used by the broker's Session. SaslHandshake (key 17)
// and SaslAuthenticate (key 36) are answered inline by the reader, in
// order, before it reads the next request:
//
//	ApiVersions*  ->  SaslHandshake(mechanism)  ->  SaslAuthenticate(token)+  ->  any request
//
// On a SASL listener nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate is served before authentication: any other request
// closes the connection (Kafka does the same), and request frames are
// bounded by PreAuthMaxRequestBytes. A failed authentication is answered
// with SASL_AUTHENTICATION_FAILED and the connection closed. After
// SaslHandshake v0 the tokens travel raw, outside Kafka framing (a 4-byte
// size, then the token, both ways) until the exchange ends; v1 wraps them
// in SaslAuthenticate. Re-authentication (KIP-368) is not offered:
// session_lifetime_ms is 0. The mechanisms themselves run in
// auth.SASLServer; the credentials come from the broker's
// auth.CredentialSource (etcd). SASL lives here, beside the framing,
// because it changes what the reader reads next and needs no partitions.
//
// # Request metrics
//
// RequestStats counts, per API key, the requests given to a Handler: a
// latency histogram (RequestLatencyBuckets, from dispatch to the encoded
// answer, the wait for the turn included) and the handler failures.
// Inline answers are not counted.
//
// # Buffers
//
// Response frame buffers come from bufpool (GetFrameBuffer, sized by
// ResponseSizeHint) and have one owner at a time: the encoder, then the
// Slot, until Responses has written the frame and put the buffer back.
// A Produce request of at least bufpool.MinPooled bytes is read into a
// pooled buffer too (its batches stay in the frame until appended): the
// reader owns it, then the request's handler goroutine, which puts it back
// when the handler has returned. Other requests' frames are fresh: their
// []byte fields (group metadata, SASL tokens) may be kept by what handles
// them.
package wire
