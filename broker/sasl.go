package broker

// SASL authentication (issue 9): SaslHandshake (key 17) and
// SaslAuthenticate (key 36), handled by the connection's reader itself,
// in order, before it reads the next request:
//
//	ApiVersions*  ->  SaslHandshake(mechanism)  ->  SaslAuthenticate(token)+  ->  any request
//
// On a SASL listener nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate is served before authentication: any other request
// closes the connection (Kafka does the same). A failed authentication is
// answered with SASL_AUTHENTICATION_FAILED and the connection closed.
// After SaslHandshake v0 the tokens travel raw, outside Kafka framing
// (a 4-byte size, then the token, both ways) until the exchange ends; v1
// wraps them in SaslAuthenticate. Re-authentication (KIP-368) is not offered: session_lifetime_ms is 0.

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// defaultSASLMechanisms are offered by a SASL listener configured without
// mechanisms: PLAIN sends the password itself, so it is opt-in.
var defaultSASLMechanisms = []string{auth.MechScramSHA256, auth.MechScramSHA512}

func knownMechanism(m string) bool {
	return m == auth.MechPlain || m == auth.MechScramSHA256 || m == auth.MechScramSHA512
}

// connAuth is a connection's identity. Owned by the connection's reader
// (SASL requests are served by the reader itself).
type connAuth struct {
	// principal is the identity requests run as: anonymousPrincipal until
	// a SASL exchange or a client certificate established another.
	principal string
	// authenticated: requests beyond the pre-auth set may be served.
	// True from the start on listeners without SASL.
	authenticated bool
	// mechanism is the one chosen by SaslHandshake ("" before).
	mechanism string
	// scram is the SCRAM exchange in progress (SCRAM mechanisms only).
	scram *auth.ScramServer
	// rawTokens: SaslHandshake v0 chose raw tokens; the reader reads them
	// instead of requests until authenticated.
	rawTokens bool
}

// saslMechanisms are the mechanisms of the connection's listener.
func (c *conn) saslMechanisms() []string {
	if len(c.l.SASLMechanisms) > 0 {
		return c.l.SASLMechanisms
	}
	return defaultSASLMechanisms
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
	if !c.l.Security.usesSASL() || c.auth.authenticated || c.auth.mechanism != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, true
	}
	resp.SupportedMechanisms = c.saslMechanisms()
	if !slices.Contains(resp.SupportedMechanisms, req.Mechanism) {
		c.log.Info("SASL mechanism not enabled", "mechanism", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, true
	}
	c.auth.mechanism, c.auth.rawTokens = req.Mechanism, req.Version == 0
	if req.Mechanism != auth.MechPlain {
		scram, err := auth.NewScramServer(req.Mechanism, c.credentialLookup(req.Mechanism))
		if err != nil { // knownMechanism was checked at Validate
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, true
		}
		c.auth.scram = scram
	}
	return resp, false
}

func (c *conn) saslAuthenticate(req *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool) {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	if c.auth.mechanism == "" || c.auth.authenticated {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake first"
		resp.ErrorMessage = &msg
		return resp, true
	}
	reply, user, err := c.saslStep(req.SASLAuthBytes)
	if err != nil {
		c.log.Info("SASL authentication failed", "mechanism", c.auth.mechanism, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", c.auth.mechanism)
		if !errors.Is(err, auth.ErrAuthFailed) && !errors.Is(err, auth.ErrBadMessage) {
			msg = fmt.Sprintf("Authentication failed with SASL mechanism %s: credentials unavailable", c.auth.mechanism)
		}
		resp.ErrorMessage = &msg
		return resp, true
	}
	resp.SASLAuthBytes = reply
	if user != "" {
		c.setPrincipal("User:"+user, c.auth.mechanism)
	}
	return resp, false
}

// RawToken runs one step of the exchange on a raw token (after
// SaslHandshake v0; wire reads and frames it); false closes the
// connection (raw tokens have no way to say why: the client sees the
// close).
func (c *conn) RawToken(token []byte) ([]byte, bool) {
	reply, user, err := c.saslStep(token)
	if err != nil {
		c.log.Info("SASL authentication failed", "mechanism", c.auth.mechanism, "err", err)
		return nil, false
	}
	if user != "" {
		c.setPrincipal("User:"+user, c.auth.mechanism)
	}
	return reply, true
}

// saslStep runs one step of the chosen mechanism. user is set once the
// exchange is complete.
func (c *conn) saslStep(msg []byte) (reply []byte, user string, err error) {
	if c.auth.mechanism == auth.MechPlain {
		user, err = auth.VerifyPlain(msg, c.credentialLookup(auth.MechPlain))
		return nil, user, err
	}
	reply, done, err := c.auth.scram.Step(msg)
	if err != nil || !done {
		return reply, "", err
	}
	return reply, c.auth.scram.User(), nil
}

// credentialLookup reads a user's SCRAM credential from etcd for mech;
// for PLAIN, the SCRAM-SHA-512 credential, else the SCRAM-SHA-256 one.
func (c *conn) credentialLookup(mech string) auth.CredentialLookup {
	mechs := []string{mech}
	if mech == auth.MechPlain {
		mechs = []string{auth.MechScramSHA512, auth.MechScramSHA256}
	}
	return func(user string) (auth.ScramCredential, bool, error) {
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
