package wire

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// plainSession is a SASL session offering PLAIN, with alice/pw stored in
// memory (the broker's source reads etcd).
func plainSession(t *testing.T) *SASLSession {
	t.Helper()
	cred, err := auth.NewScramCredential(auth.MechScramSHA512, "pw", auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(user string, mechs []string) (auth.ScramCredential, bool, error) {
		for _, m := range mechs {
			if user == "alice" && m == auth.MechScramSHA512 {
				return cred, true, nil
			}
		}
		return auth.ScramCredential{}, false, nil
	}
	return NewSASLSession(true, []string{auth.MechPlain}, creds, "User:ANONYMOUS", slog.New(slog.DiscardHandler))
}

// decodeResp decodes the body of a response frame into resp.
func decodeResp(t *testing.T, frame []byte, resp kmsg.Response) {
	t.Helper()
	// size int32, correlation id int32, then the body (non-flexible versions).
	if err := resp.ReadFrom(frame[8:]); err != nil {
		t.Fatal(err)
	}
}

func TestSASLSessionV1(t *testing.T) {
	s := plainSession(t)
	if s.Authenticated() || s.Principal() != "User:ANONYMOUS" {
		t.Fatalf("new session: authenticated %v principal %q", s.Authenticated(), s.Principal())
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, auth.MechPlain
	frame, closeAfter := s.Serve(1, hs)
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	hsResp.Version = 1
	decodeResp(t, frame, hsResp)
	if closeAfter || hsResp.ErrorCode != 0 || s.RawTokenLimit() != 0 {
		t.Fatalf("handshake: close %v code %d raw limit %d", closeAfter, hsResp.ErrorCode, s.RawTokenLimit())
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00pw")
	if _, closeAfter = s.Serve(2, au); closeAfter || !s.Authenticated() || s.Principal() != "User:alice" {
		t.Fatalf("authenticate: close %v authenticated %v principal %q", closeAfter, s.Authenticated(), s.Principal())
	}
	// A second handshake after authentication is out of sequence.
	frame, closeAfter = s.Serve(3, hs)
	decodeResp(t, frame, hsResp)
	if !closeAfter || hsResp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("late handshake: close %v code %d", closeAfter, hsResp.ErrorCode)
	}
}

func TestSASLSessionRawTokensAndFailure(t *testing.T) {
	s := plainSession(t)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = auth.MechPlain // v0: raw tokens follow
	if _, closeAfter := s.Serve(1, hs); closeAfter || s.RawTokenLimit() != auth.MaxMessageSize {
		t.Fatalf("v0 handshake: close %v raw limit %d", closeAfter, s.RawTokenLimit())
	}
	if _, ok := s.RawToken([]byte("\x00alice\x00wrong")); ok || s.Authenticated() {
		t.Fatalf("wrong password accepted (ok %v)", ok)
	}

	s = plainSession(t)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	frame, closeAfter := s.Serve(1, au)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	decodeResp(t, frame, resp)
	if !closeAfter || resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate before handshake: close %v code %d", closeAfter, resp.ErrorCode)
	}
}

func TestSASLSessionWithoutSASL(t *testing.T) {
	s := NewSASLSession(false, nil, nil, "User:ANONYMOUS", slog.New(slog.DiscardHandler))
	if !s.Authenticated() || s.RawTokenLimit() != 0 {
		t.Fatalf("plaintext session: authenticated %v raw limit %d", s.Authenticated(), s.RawTokenLimit())
	}
	if _, closeAfter := s.Serve(1, kmsg.NewPtrSASLHandshakeRequest()); !closeAfter {
		t.Fatal("handshake on a listener without SASL must close")
	}
}
