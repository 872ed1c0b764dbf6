package auth

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// source serves the first stored credential among mechs, as the broker's
// etcd-backed CredentialSource does, and records what was asked.
func (u users) source(asked *[][]string) CredentialSource {
	return func(user string, mechs []string) (ScramCredential, bool, error) {
		*asked = append(*asked, mechs)
		for _, m := range mechs {
			if c, ok := u[user][m]; ok {
				return c, true, nil
			}
		}
		return ScramCredential{}, false, nil
	}
}

func TestSASLServerHandshake(t *testing.T) {
	var asked [][]string
	s := NewSASLServer(nil, users{}.source(&asked))
	if !slices.Equal(s.Mechanisms(), DefaultMechanisms) {
		t.Fatalf("default mechanisms %v", s.Mechanisms())
	}
	if _, _, err := s.Step([]byte("x")); !errors.Is(err, ErrSASLState) {
		t.Fatalf("step before handshake: %v", err)
	}
	if err := s.Handshake(MechPlain); !errors.Is(err, ErrMechanismNotEnabled) || s.Mechanism() != "" {
		t.Fatalf("PLAIN not offered by default: %v, mechanism %q", err, s.Mechanism())
	}
	if err := s.Handshake(MechScramSHA512); err != nil || s.Mechanism() != MechScramSHA512 {
		t.Fatalf("handshake: %v, mechanism %q", err, s.Mechanism())
	}
	if err := s.Handshake(MechScramSHA256); !errors.Is(err, ErrSASLState) {
		t.Fatalf("second handshake: %v", err)
	}
	if len(asked) != 0 {
		t.Fatalf("handshake read credentials: %v", asked)
	}
}

func TestSASLServerPlainPrefersSHA512(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw-512", MechScramSHA512)
	store.add(t, "alice", "pw-256", MechScramSHA256)
	var asked [][]string
	s := NewSASLServer([]string{MechPlain}, store.source(&asked))
	if err := s.Handshake(MechPlain); err != nil {
		t.Fatal(err)
	}
	reply, user, err := s.Step([]byte("\x00alice\x00pw-512"))
	if err != nil || user != "alice" || reply != nil {
		t.Fatalf("PLAIN: reply %q, user %q, err %v", reply, user, err)
	}
	if want := [][]string{{MechScramSHA512, MechScramSHA256}}; !slices.EqualFunc(asked, want, slices.Equal) {
		t.Fatalf("asked %v, want %v", asked, want)
	}
	if _, _, err := s.Step([]byte("\x00alice\x00pw-512")); !errors.Is(err, ErrSASLState) {
		t.Fatalf("step after success: %v", err)
	}

	s = NewSASLServer([]string{MechPlain}, store.source(&asked))
	_ = s.Handshake(MechPlain)
	if _, _, err := s.Step([]byte("\x00alice\x00pw-256")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("PLAIN against the SHA-256 credential while a SHA-512 one exists: %v", err)
	}
	if _, _, err := s.Step([]byte("\x00alice\x00pw-512")); !errors.Is(err, ErrSASLState) {
		t.Fatalf("step after failure: %v", err)
	}
}

func TestSASLServerScram(t *testing.T) {
	store := users{}
	store.add(t, "bob", "s3cret", MechScramSHA256)
	var asked [][]string
	s := NewSASLServer(nil, store.source(&asked))
	if err := s.Handshake(MechScramSHA256); err != nil {
		t.Fatal(err)
	}
	session, msg, err := scram.Auth{User: "bob", Pass: "s3cret"}.AsSha256Mechanism().Authenticate(context.Background(), "b:9092")
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for step := 0; user == ""; step++ {
		if step > 2 {
			t.Fatal("exchange did not complete in two steps")
		}
		var reply []byte
		if reply, user, err = s.Step(msg); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if _, msg, err = session.Challenge(reply); err != nil {
			t.Fatalf("client at step %d: %v", step, err)
		}
	}
	if user != "bob" {
		t.Fatalf("user %q", user)
	}
	if want := [][]string{{MechScramSHA256}}; !slices.EqualFunc(asked, want, slices.Equal) {
		t.Fatalf("asked %v, want %v", asked, want)
	}
}
