package auth

import (
	"errors"
	"fmt"
	"slices"
)

// DefaultMechanisms are offered by a SASL listener configured without
// mechanisms: PLAIN sends the password itself, so it is opt-in.
var DefaultMechanisms = []string{MechScramSHA256, MechScramSHA512}

// KnownMechanism reports whether m is a mechanism a SASLServer can run.
func KnownMechanism(m string) bool {
	return m == MechPlain || m == MechScramSHA256 || m == MechScramSHA512
}

// Errors of the SASL sequence (the exchanges' own errors are the sentinel
// errors above).
var (
	// ErrSASLState: a handshake after a mechanism was chosen, or an
	// authenticate before one or after the exchange ended (Kafka's
	// ILLEGAL_SASL_STATE).
	ErrSASLState = errors.New("auth: SASL request out of sequence")
	// ErrMechanismNotEnabled: the client asked for a mechanism the
	// listener does not offer (Kafka's UNSUPPORTED_SASL_MECHANISM).
	ErrMechanismNotEnabled = errors.New("auth: SASL mechanism not enabled")
)

// CredentialSource returns user's first stored credential among
// mechanisms, tried in order; found false when it has none of them. err
// is a failure to look (etcd unreachable), which aborts the exchange.
type CredentialSource func(user string, mechanisms []string) (cred ScramCredential, found bool, err error)

// SASLServer is the server side of one connection's SASL authentication,
// a pure state machine:
//
//	Handshake(mechanism)  ->  Step(token)+  ->  done (user known)
//
// Handshake chooses the mechanism once; Step feeds it the client's tokens
// until the exchange completes. Any error ends the authentication: the
// caller answers it and closes the connection. PLAIN completes in one step
// against the user's SCRAM-SHA-512 credential, else its SCRAM-SHA-256 one;
// the SCRAM mechanisms run a ScramServer against the credential of their
// own mechanism. Re-authentication (KIP-368) is not offered. Owned by one
// goroutine (the connection's reader); not safe for concurrent use.
type SASLServer struct {
	mechanisms []string
	creds      CredentialSource

	// mechanism is the one Handshake chose ("" before).
	mechanism string
	// scram is the SCRAM exchange in progress (SCRAM mechanisms only).
	scram *ScramServer
	// done: the exchange completed or failed; no further step is served.
	done bool
}

// NewSASLServer starts the authentication of a connection on a listener
// offering mechanisms (DefaultMechanisms when empty), reading credentials
// from creds.
func NewSASLServer(mechanisms []string, creds CredentialSource) *SASLServer {
	if len(mechanisms) == 0 {
		mechanisms = DefaultMechanisms
	}
	return &SASLServer{mechanisms: mechanisms, creds: creds}
}

// Mechanisms are the mechanisms offered (Kafka's SaslHandshake answer).
func (s *SASLServer) Mechanisms() []string { return s.mechanisms }

// Mechanism is the mechanism Handshake chose ("" before).
func (s *SASLServer) Mechanism() string { return s.mechanism }

// Handshake chooses the mechanism: ErrSASLState when one is already
// chosen, ErrMechanismNotEnabled when it is not offered.
func (s *SASLServer) Handshake(mechanism string) error {
	if s.mechanism != "" {
		return ErrSASLState
	}
	if !slices.Contains(s.mechanisms, mechanism) {
		return fmt.Errorf("%w: %q", ErrMechanismNotEnabled, mechanism)
	}
	if mechanism != MechPlain {
		scram, err := NewScramServer(mechanism, s.lookup(mechanism))
		if err != nil { // a mechanism offered but unknown: refused as not enabled
			return fmt.Errorf("%w: %w", ErrMechanismNotEnabled, err)
		}
		s.scram = scram
	}
	s.mechanism = mechanism
	return nil
}

// Step consumes the client's next token and returns the reply to send.
// user is set once the exchange is complete; after that, or after an
// error, every step fails with ErrSASLState, as does a step before
// Handshake.
func (s *SASLServer) Step(token []byte) (reply []byte, user string, err error) {
	if s.mechanism == "" || s.done {
		return nil, "", ErrSASLState
	}
	reply, user, err = s.step(token)
	s.done = err != nil || user != ""
	return reply, user, err
}

func (s *SASLServer) step(token []byte) (reply []byte, user string, err error) {
	if s.mechanism == MechPlain {
		user, err = VerifyPlain(token, s.lookup(MechPlain))
		return nil, user, err
	}
	reply, done, err := s.scram.Step(token)
	if err != nil || !done {
		return reply, "", err
	}
	return reply, s.scram.User(), nil
}

// lookup reads the credential mechanism verifies against: for PLAIN the
// SCRAM-SHA-512 credential, else the SCRAM-SHA-256 one.
func (s *SASLServer) lookup(mechanism string) CredentialLookup {
	mechs := []string{mechanism}
	if mechanism == MechPlain {
		mechs = []string{MechScramSHA512, MechScramSHA256}
	}
	return func(user string) (ScramCredential, bool, error) {
		return s.creds(user, mechs)
	}
}
