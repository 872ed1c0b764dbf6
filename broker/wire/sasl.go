package wire

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

const (
	// SASLHandshakeKey and SASLAuthenticateKey are the API keys a
	// SASLSession answers (inline, on the reader).
	SASLHandshakeKey    = 17
	SASLAuthenticateKey = 36
	// PreAuthMaxRequestBytes bounds request frames before authentication
	// on a SASL listener (Kafka's sasl.server.max.receive.size): an
	// unauthenticated client cannot make the broker allocate 100 MiB
	// (CVE-2022-34917).
	PreAuthMaxRequestBytes = 512 << 10
)

// SASLSession is one connection's identity and the Kafka side of its SASL
// authentication: it decodes SaslHandshake and SaslAuthenticate, answers
// Kafka's error codes, and tells the reader when tokens travel raw. The
// mechanisms run in auth.SASLServer. Owned by the connection's reader (SASL
// requests are served by the reader itself), so it needs no lock.
type SASLSession struct {
	log *slog.Logger
	// principal is the identity requests run as: the anonymous principal
	// until a SASL exchange or a client certificate established another.
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

// NewSASLSession is the identity of a new connection, running as anonymous
// until authenticated. Without useSASL (the listener has no SASL) the
// connection starts authenticated; with it, the listener's mechanisms are
// offered and creds supplies the stored credentials.
func NewSASLSession(useSASL bool, mechanisms []string, creds auth.CredentialSource, anonymous string, log *slog.Logger) *SASLSession {
	s := &SASLSession{log: log, principal: anonymous, authenticated: !useSASL}
	if useSASL {
		s.sasl = auth.NewSASLServer(mechanisms, creds)
	}
	return s
}

// Principal is the identity requests run as now.
func (s *SASLSession) Principal() string { return s.principal }

// Authenticated: requests beyond the pre-auth set may be served.
func (s *SASLSession) Authenticated() bool { return s.authenticated }

// SetPrincipal records a successful authentication by method (a SASL
// mechanism, or mTLS).
func (s *SASLSession) SetPrincipal(principal, method string) {
	s.principal, s.authenticated = principal, true
	s.log.Info("client authenticated", "principal", principal, "method", method)
}

// RawTokenLimit is the largest SASL message while SaslHandshake v0 chose
// raw tokens and authentication is not done yet; 0 otherwise.
func (s *SASLSession) RawTokenLimit() uint32 {
	if s.rawTokens && !s.authenticated {
		return auth.MaxMessageSize
	}
	return 0
}

// Serve answers a SaslHandshake or SaslAuthenticate request: the response
// frame, and whether the connection must close after it.
func (s *SASLSession) Serve(correlationID int32, req kmsg.Request) (frame []byte, closeAfter bool) {
	var resp kmsg.Response
	switch req := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp, closeAfter = s.handshake(req)
	case *kmsg.SASLAuthenticateRequest:
		resp, closeAfter = s.authenticate(req)
	default:
		return nil, true
	}
	resp.SetVersion(req.GetVersion())
	return AppendResponseFrame(nil, correlationID, resp), closeAfter
}

func (s *SASLSession) handshake(req *kmsg.SASLHandshakeRequest) (kmsg.Response, bool) {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if s.sasl == nil || s.authenticated || s.sasl.Mechanism() != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, true
	}
	resp.SupportedMechanisms = s.sasl.Mechanisms()
	if err := s.sasl.Handshake(req.Mechanism); err != nil {
		s.log.Info("SASL mechanism not enabled", "mechanism", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, true
	}
	s.rawTokens = req.Version == 0
	return resp, false
}

func (s *SASLSession) authenticate(req *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool) {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	if s.sasl == nil || s.sasl.Mechanism() == "" || s.authenticated {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake first"
		resp.ErrorMessage = &msg
		return resp, true
	}
	mech := s.sasl.Mechanism()
	reply, user, err := s.sasl.Step(req.SASLAuthBytes)
	if err != nil {
		s.log.Info("SASL authentication failed", "mechanism", mech, "err", err)
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
		s.SetPrincipal("User:"+user, mech)
	}
	return resp, false
}

// RawToken runs one step of the exchange on a raw token (after
// SaslHandshake v0; the reader reads and frames it); false closes the
// connection (raw tokens have no way to say why: the client sees the
// close).
func (s *SASLSession) RawToken(token []byte) ([]byte, bool) {
	reply, user, err := s.sasl.Step(token)
	if err != nil {
		s.log.Info("SASL authentication failed", "mechanism", s.sasl.Mechanism(), "err", err)
		return nil, false
	}
	if user != "" {
		s.SetPrincipal("User:"+user, s.sasl.Mechanism())
	}
	return reply, true
}
