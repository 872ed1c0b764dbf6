package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/wire"
)

// conn is the broker's side of one client connection (a wire.Session):
// its listener, its identity and how its requests reach their handlers.
// wire.Conn runs the connection (framing, order, limits) and calls conn
// from its reader goroutine only, which therefore owns auth; the handlers
// conn starts read only the requestContext built for them.
type conn struct {
	b    *Broker
	nc   net.Conn // the socket, or the TLS connection over it
	l    ListenerConfig
	host string // the peer's IP address
	log  *slog.Logger
	ctx  context.Context // ends when the connection closes
	// SASLSession is the connection's identity (reader-owned); it answers
	// the raw-token half of wire.Session.
	*wire.SASLSession
}

var _ wire.Session = (*conn)(nil)

// newConn starts the session of a connection accepted on l. On an SSL
// listener a verified client certificate makes the principal "User:" +
// its subject (Kafka's default principal builder).
func newConn(ctx context.Context, b *Broker, l ListenerConfig, info wire.ConnInfo) *conn {
	c := &conn{
		b:    b,
		nc:   info.Conn,
		l:    l,
		host: info.Host,
		log:  info.Log,
		ctx:  ctx,
	}
	c.SASLSession = wire.NewSASLSession(l.Security.UsesSASL(), l.SASLMechanisms, c.scramCredential, anonymousPrincipal, c.log)
	if info.TLS != nil && l.Security == SSL && len(info.TLS.PeerCertificates) > 0 && l.TLS.ClientAuth >= tls.VerifyClientCertIfGiven {
		c.SetPrincipal("User:"+info.TLS.PeerCertificates[0].Subject.String(), "mTLS")
	}
	return c
}

// MaxRequestBytes is socket.request.max.bytes, or less before SASL
// authentication.
func (c *conn) MaxRequestBytes() int32 {
	if !c.Authenticated() {
		return min(c.b.cfg.SocketRequestMaxBytes, wire.PreAuthMaxRequestBytes)
	}
	return c.b.cfg.SocketRequestMaxBytes
}

// Route refuses requests before SASL authentication, answers SASL and the
// ApiVersions fallback on the reader, and sends everything else to its
// handler in the API table.
func (c *conn) Route(hdr wire.RequestHeader, req kmsg.Request) wire.Route {
	if !c.Authenticated() && !c.b.apis.preAuthAllowed(hdr.APIKey) {
		c.log.Info("closing connection: request before SASL authentication", "api_key", hdr.APIKey)
		return wire.Route{Refuse: true}
	}
	switch {
	case req == nil: // unsupported ApiVersions version: answer v0
		return wire.Route{Inline: func() ([]byte, bool) {
			return wire.AppendResponseFrame(nil, hdr.CorrelationID, c.b.apis.apiVersionsFallback()), false
		}}
	case hdr.APIKey == wire.SASLHandshakeKey || hdr.APIKey == wire.SASLAuthenticateKey:
		return wire.Route{Inline: func() ([]byte, bool) { return c.Serve(hdr.CorrelationID, req) }}
	}
	// Built here, on the reader: the principal is the one in force when
	// the request was read.
	rc := &requestContext{
		conn:          c.nc,
		clientID:      hdr.ClientID,
		correlationID: hdr.CorrelationID,
		apiKey:        hdr.APIKey,
		version:       hdr.Version,
		principal:     c.Principal(),
		host:          c.host,
		listener:      c.l.Name,
	}
	entry := c.b.apis[hdr.APIKey]
	return wire.Route{Handle: func(ctx context.Context, release func()) ([]byte, int32, error) {
		rc.orderRelease = release
		return c.serve(ctx, entry, rc, req)
	}}
}

// serve runs the request's handler and encodes its response (nil frame:
// no response), throttled as its quota asked.
func (c *conn) serve(ctx context.Context, entry apiEntry, rc *requestContext, req kmsg.Request) ([]byte, int32, error) {
	// After the response is encoded into its frame (a copy) or abandoned,
	// and before the slot is finished: the reads' buffers go back.
	defer func() { rc.reads.Release() }()
	resp, err := entry.handle(ctx, rc, req)
	if err != nil || resp == nil {
		return nil, 0, err
	}
	resp.SetVersion(req.GetVersion())
	applyThrottle(rc, resp)
	c.b.rewriteEndpoints(rc.listener, resp)
	frame := wire.AppendResponseFrame(wire.GetFrameBuffer(wire.ResponseSizeHint(resp)), rc.correlationID, resp)
	return frame, rc.throttleMs, nil
}

// releaseOrder lets the next request of the connection start. The
// connection calls it when the handler returns; a handler may call it
// earlier, once every effect of its request has happened and only a wait
// remains (Produce and WriteTxnMarkers after their appends, waiting for
// the HW), so that pipelined requests overlap their waits. Nothing the
// next request does can then be observed before this one's effects. Safe
// to call more than once.
func (rc *requestContext) releaseOrder() {
	if rc.orderRelease != nil {
		rc.orderRelease()
	}
}

// saslLookupTimeout bounds one credential read from etcd.
const saslLookupTimeout = 10 * time.Second

// scramCredential is the connection's auth.CredentialSource: the user's
// first stored credential among mechs, read from etcd within one
// saslLookupTimeout.
func (c *conn) scramCredential(user string, mechs []string) (auth.ScramCredential, bool, error) {
	ctx, cancel := context.WithTimeout(c.ctx, saslLookupTimeout)
	defer cancel()
	for _, m := range mechs {
		cred, found, err := c.b.store.ScramCredential(ctx, user, m)
		if err != nil || found {
			return cred, found, err
		}
	}
	return auth.ScramCredential{}, false, nil
}

// handleSASLUnreachable is the API table's handler of the SASL keys: the
// connection's reader serves them itself (wire.SASLSession), so reaching it
// is a bug.
func (b *Broker) handleSASLUnreachable(context.Context, *requestContext, kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("broker: SASL request outside the connection reader")
}
