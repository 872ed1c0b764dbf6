package broker

// What a handler gets besides the decoded request: the request's context
// (connection, identity, quota throttle, pooled reads) and the handler
// signature the API table (apis.go) binds.

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/bufpool"
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
	// Security: principal is the connection's authenticated
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
	// (Fetch, hotlog.Log.ReadPooled); the connection releases them once
	// the response is encoded into its frame (a copy). The frame's own
	// ownership is broker/wire's (buffers.go); cold reads (the cold cache's
	// blocks) are never pooled.
	reads *bufpool.Set
}

// anonymousPrincipal is the principal of an unauthenticated connection.
const anonymousPrincipal = "User:ANONYMOUS"

// handlerFunc serves one API key. It returns the response to write, or a nil
// response for requests that get none (Produce with acks=0). A non-nil error
// means "close the connection": protocol errors go inside the response.
type handlerFunc func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error)
