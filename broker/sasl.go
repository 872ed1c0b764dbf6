package broker

// SASL authentication: SaslHandshake (key 17) and SaslAuthenticate (key
// 36), handled by the connection's reader itself, in order, before it
// reads the next request:
//
//	ApiVersions*  ->  SaslHandshake(mechanism)  ->  SaslAuthenticate(token)+  ->  any request
//
// On a SASL listener nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate is served before authentication: any other request
// closes the connection (Kafka does the same). A failed authentication is
// answered with SASL_AUTHENTICATION_FAILED and the connection closed.
// After SaslHandshake v0 the tokens travel raw, outside Kafka framing
// (a 4-byte size, then the token, both ways) until the exchange ends; v1
// wraps them in SaslAuthenticate. Re-authentication (KIP-368) is not
// offered: session_lifetime_ms is 0. The mechanisms themselves run in
// auth.SASLServer; this file decodes the requests, answers Kafka's codes
// and frames the raw tokens.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/wire"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
	// saslLookupTimeout bounds one credential read from etcd.
	saslLookupTimeout = 10 * time.Second
	// preAuthMaxRequestBytes bounds request frames before authentication
	// on a SASL listener (Kafka's sasl.server.max.receive.size): an
	// unauthenticated client cannot make the broker allocate 100 MiB
	// (CVE-2022-34917).
	preAuthMaxRequestBytes = 512 << 10
)

// connAuth is a connection's identity. Owned by the connection's reader
// (SASL requests are served by the reader itself).
type connAuth struct {
	// principal is the identity requests run as: anonymousPrincipal until
	// a SASL exchange or a client certificate established another.
	principal string
	// authenticated: requests beyond the pre-auth set may be served.
	// True from the start on listeners without SASL.
	authenticated bool
	// sasl is the SASL authentication (nil on listeners without SASL).
	sasl *auth.SASLServer
	// rawTokens: SaslHandshake v0 chose raw tokens; the reader reads them
	// instead of requests until authenticated.
	rawTokens bool
}

// newConnAuth is the identity of a new connection on listener l.
func newConnAuth(c *conn, l ListenerConfig) connAuth {
	a := connAuth{principal: anonymousPrincipal, authenticated: !l.Security.UsesSASL()}
	if l.Security.UsesSASL() {
		a.sasl = auth.NewSASLServer(l.SASLMechanisms, c.scramCredential)
	}
	return a
}

// serveSASL answers a SaslHandshake or SaslAuthenticate request on the
// connection's reader: the response frame, and whether the connection
// must close after it.
func (c *conn) serveSASL(hdr wire.RequestHeader, req kmsg.Request) (frame []byte, closeAfter bool) {
	var resp kmsg.Response
	switch req := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp, closeAfter = c.saslHandshake(req)
	case *kmsg.SASLAuthenticateRequest:
		resp, closeAfter = c.saslAuthenticate(req)
	default:
		return nil, true
	}
	resp.SetVersion(req.GetVersion())
	return wire.AppendResponseFrame(nil, hdr.CorrelationID, resp), closeAfter
}

func (c *conn) saslHandshake(req *kmsg.SASLHandshakeRequest) (kmsg.Response, bool) {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if c.auth.sasl == nil || c.auth.authenticated || c.auth.sasl.Mechanism() != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, true
	}
	resp.SupportedMechanisms = c.auth.sasl.Mechanisms()
	if err := c.auth.sasl.Handshake(req.Mechanism); err != nil {
		c.log.Info("SASL mechanism not enabled", "mechanism", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, true
	}
	c.auth.rawTokens = req.Version == 0
	return resp, false
}

func (c *conn) saslAuthenticate(req *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool) {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	if c.auth.sasl == nil || c.auth.sasl.Mechanism() == "" || c.auth.authenticated {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake first"
		resp.ErrorMessage = &msg
		return resp, true
	}
	mech := c.auth.sasl.Mechanism()
	reply, user, err := c.auth.sasl.Step(req.SASLAuthBytes)
	if err != nil {
		c.log.Info("SASL authentication failed", "mechanism", mech, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech)
		if !errors.Is(err, auth.ErrAuthFailed) && !errors.Is(err, auth.ErrBadMessage) {
			msg = fmt.Sprintf("Authentication failed with SASL mechanism %s: credentials unavailable", mech)
		}
		resp.ErrorMessage = &msg
		return resp, true
	}
	resp.SASLAuthBytes = reply
	if user != "" {
		c.setPrincipal("User:"+user, mech)
	}
	return resp, false
}

// RawToken runs one step of the exchange on a raw token (after
// SaslHandshake v0; wire reads and frames it); false closes the
// connection (raw tokens have no way to say why: the client sees the
// close).
func (c *conn) RawToken(token []byte) ([]byte, bool) {
	reply, user, err := c.auth.sasl.Step(token)
	if err != nil {
		c.log.Info("SASL authentication failed", "mechanism", c.auth.sasl.Mechanism(), "err", err)
		return nil, false
	}
	if user != "" {
		c.setPrincipal("User:"+user, c.auth.sasl.Mechanism())
	}
	return reply, true
}

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

// setPrincipal records a successful authentication.
func (c *conn) setPrincipal(principal, method string) {
	c.auth.principal, c.auth.authenticated = principal, true
	c.log.Info("client authenticated", "principal", principal, "method", method)
}

// handleSASLUnreachable is the API table's handler of the SASL keys: the
// connection serves them itself (serveSASL), so reaching it is a bug.
func (b *Broker) handleSASLUnreachable(context.Context, *requestContext, kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("broker: SASL request outside the connection reader")
}
