package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
)

// CredentialLookup finds a user's stored credential. found false means no
// such user (or no credential for the mechanism); err is a failure to look
// (etcd unreachable), which aborts the exchange.
type CredentialLookup func(user string) (cred ScramCredential, found bool, err error)

type scramState int

const (
	expectClientFirst scramState = iota
	expectClientFinal
	scramDone
	scramFailed
)

// ScramServer is the server side of one SCRAM exchange (RFC 5802, RFC
// 7677): a pure state machine fed the client's messages by Step. It does
// no I/O besides calling lookup once. Owned by one goroutine (the
// connection doing the handshake); not safe for concurrent use.
type ScramServer struct {
	mech    string
	newHash func() hash.Hash
	lookup  CredentialLookup
	state   scramState
	// serverNonce makes the server's nonce part (newServerNonce; tests
	// replay RFC 7677's fixed one).
	serverNonce func() string

	user  string
	cred  ScramCredential
	known bool // false: cred is fake and the proof step must fail
	// The parts of the AuthMessage and what the final message must echo.
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	// legacyNonce is client nonce + nonce: librdkafka before 2.10 echoes
	// the client nonce twice in client-final (Kafka accepts it, checking
	// only that the nonce ends with the one issued).
	legacyNonce string
}

// NewScramServer starts an exchange for mech (MechScramSHA256 or
// MechScramSHA512).
func NewScramServer(mech string, lookup CredentialLookup) (*ScramServer, error) {
	newHash, err := hashFor(mech)
	if err != nil {
		return nil, err
	}
	if lookup == nil {
		return nil, fmt.Errorf("auth: nil credential lookup")
	}
	return &ScramServer{mech: mech, newHash: newHash, lookup: lookup, serverNonce: newServerNonce}, nil
}

// Step consumes the client's next message. The client-first message yields
// the server-first message; the client-final message yields the
// server-final message with done true. Any error ends the exchange: the
// caller answers SASL_AUTHENTICATION_FAILED and closes the connection.
func (s *ScramServer) Step(msg []byte) (reply []byte, done bool, err error) {
	if len(msg) > MaxMessageSize {
		s.state = scramFailed
		return nil, false, fmt.Errorf("%w: message of %d bytes exceeds %d", ErrBadMessage, len(msg), MaxMessageSize)
	}
	switch s.state {
	case expectClientFirst:
		reply, err = s.clientFirst(string(msg))
	case expectClientFinal:
		reply, err = s.clientFinal(string(msg))
		done = err == nil
	default:
		err = fmt.Errorf("%w: exchange already finished", ErrBadMessage)
	}
	switch {
	case err != nil:
		s.state = scramFailed
		return nil, false, err
	case done:
		s.state = scramDone
	default:
		s.state = expectClientFinal
	}
	return reply, done, nil
}

// User is the authenticated user once Step returned done; "" before.
func (s *ScramServer) User() string {
	if s.state != scramDone {
		return ""
	}
	return s.user
}

// clientFirst handles gs2-header client-first-message-bare:
//
//	n,[a=authzid],n=user,r=cnonce
func (s *ScramServer) clientFirst(msg string) ([]byte, error) {
	authzid, bare, err := s.parseGS2Header(msg)
	if err != nil {
		return nil, err
	}
	fields := strings.Split(bare, ",")
	if strings.HasPrefix(fields[0], "m=") {
		return nil, fmt.Errorf("%w: mandatory extension not supported", ErrBadMessage)
	}
	if len(fields) != 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, fmt.Errorf("%w: client-first message must be n=user,r=nonce without extensions", ErrBadMessage)
	}
	user, err := decodeSaslName(fields[0][2:])
	if err != nil {
		return nil, err
	}
	clientNonce := fields[1][2:]
	if !validNonce(clientNonce) {
		return nil, fmt.Errorf("%w: client nonce not printable", ErrBadMessage)
	}
	if authzid != "" && authzid != user {
		return nil, fmt.Errorf("%w: authorization id differs from the user", ErrAuthFailed)
	}
	if err := s.loadCredential(user); err != nil {
		return nil, err
	}
	s.clientFirstBare = bare
	s.nonce = clientNonce + s.serverNonce()
	s.legacyNonce = clientNonce + s.nonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

// parseGS2Header splits "n,[a=authzid]," from the rest. Channel binding is
// not supported: "p=..." is refused, and so is "y" (as Kafka does).
func (s *ScramServer) parseGS2Header(msg string) (authzid, bare string, err error) {
	if strings.HasPrefix(msg, "p=") || strings.HasPrefix(msg, "y,") {
		return "", "", fmt.Errorf("%w: channel binding not supported", ErrBadMessage)
	}
	rest, ok := strings.CutPrefix(msg, "n,")
	if !ok {
		return "", "", fmt.Errorf("%w: client-first message must start with the gs2 header \"n,\"", ErrBadMessage)
	}
	zid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", fmt.Errorf("%w: truncated gs2 header", ErrBadMessage)
	}
	if zid != "" {
		encoded, ok := strings.CutPrefix(zid, "a=")
		if !ok {
			return "", "", fmt.Errorf("%w: bad authzid in gs2 header", ErrBadMessage)
		}
		if authzid, err = decodeSaslName(encoded); err != nil {
			return "", "", err
		}
	}
	s.gs2Header = msg[:len(msg)-len(bare)]
	return authzid, bare, nil
}

// loadCredential looks the user up. An unknown user (or a stored
// credential of another mechanism or that fails validation) gets a fake
// credential, so the server-first message reveals nothing and the exchange
// fails only at the proof, as Kafka does.
func (s *ScramServer) loadCredential(user string) error {
	cred, found, err := s.lookup(user)
	if err != nil {
		return fmt.Errorf("auth: credential lookup: %w", err)
	}
	s.user = user
	if found && cred.Mechanism == s.mech && cred.Validate() == nil {
		s.cred, s.known = cred, true
		return nil
	}
	s.cred, s.known = fakeCredential(s.mech, user), false
	return nil
}

// newServerNonce: 24 random bytes, base64url (printable, no ',').
func newServerNonce() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// clientFinal handles c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>.
func (s *ScramServer) clientFinal(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: client-final message without proof", ErrBadMessage)
	}
	withoutProof, proofText := msg[:i], msg[i+len(",p="):]
	fields := strings.Split(withoutProof, ",")
	if len(fields) != 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, fmt.Errorf("%w: client-final message must be c=...,r=...,p=... without extensions", ErrBadMessage)
	}
	if fields[0][2:] != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, fmt.Errorf("%w: channel binding data does not echo the gs2 header", ErrBadMessage)
	}
	// CVE-2024-56128: the nonce must be the one this server issued (or,
	// from librdkafka < 2.10, that one after the client nonce again: both
	// carry the whole server nonce, and the proof covers the message sent).
	got := []byte(fields[1][2:])
	if subtle.ConstantTimeCompare(got, []byte(s.nonce)) != 1 && subtle.ConstantTimeCompare(got, []byte(s.legacyNonce)) != 1 {
		return nil, fmt.Errorf("%w: nonce does not match the server's", ErrAuthFailed)
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != s.newHash().Size() {
		return nil, fmt.Errorf("%w: bad client proof encoding", ErrBadMessage)
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	if !s.proofValid(proof, authMessage) {
		return nil, fmt.Errorf("%w: invalid credentials", ErrAuthFailed)
	}
	signature := hmacSum(s.newHash, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(signature)), nil
}

// proofValid recovers ClientKey = proof XOR HMAC(StoredKey, AuthMessage) and
// compares H(ClientKey) with StoredKey in constant time. An unknown user's
// fake credential is compared too, so both paths cost the same.
func (s *ScramServer) proofValid(proof, authMessage []byte) bool {
	clientKey := hmacSum(s.newHash, s.cred.StoredKey, authMessage)
	subtle.XORBytes(clientKey, clientKey, proof)
	equal := subtle.ConstantTimeCompare(hashSum(s.newHash, clientKey), s.cred.StoredKey) == 1
	return equal && s.known
}
