package auth

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// rfcCredential is RFC 7677's example credential (user "user", password
// "pencil"); with the example's server nonce the fuzzer can reach a
// successful exchange from the committed seed.
func rfcCredential(tb testing.TB) ScramCredential {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, _ := pbkdf2.Key(sha256.New, "pencil", salt, 4096, 32)
	c, err := ScramCredentialFromSalted(MechScramSHA256, salt, 4096, salted)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

const rfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"

// FuzzScramServer feeds arbitrary client-first and client-final messages:
// the server must never panic, and must finish only for the real user with
// the nonce it issued.
func FuzzScramServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"),
		[]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("p=tls-unique,,n=user,r=abc"), []byte("c=cD10bHMtdW5pcXVlLCw=,r=abc,p=AAAA"))
	cred := rfcCredential(f)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		server, err := NewScramServer(MechScramSHA256, func(user string) (ScramCredential, bool, error) {
			return cred, user == "user", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		server.serverNonce = func() string { return rfcServerNonce }
		reply, done, err := server.Step(first)
		if err != nil {
			checkSentinel(t, err)
			return
		}
		if done || !bytes.HasPrefix(reply, []byte("r=")) {
			t.Fatalf("client-first %q: reply %q done %v", first, reply, done)
		}
		issued := string(reply[2:bytes.IndexByte(reply, ',')])
		reply, done, err = server.Step(final)
		if err != nil {
			checkSentinel(t, err)
			if server.User() != "" {
				t.Fatalf("failed exchange reports user %q", server.User())
			}
			return
		}
		if !done || server.User() != "user" || !bytes.HasPrefix(reply, []byte("v=")) {
			t.Fatalf("final %q: reply %q done %v user %q", final, reply, done, server.User())
		}
		if !strings.Contains(string(final), ",r="+issued+",p=") {
			t.Fatalf("exchange succeeded with a nonce other than %q: %q", issued, final)
		}
	})
}

func checkSentinel(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrBadMessage) && !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("error %v wraps no sentinel", err)
	}
}

// FuzzPlain: VerifyPlain never panics and accepts only the exact password.
func FuzzPlain(f *testing.F) {
	f.Add([]byte("\x00user\x00pencil"))
	f.Add([]byte("user\x00user\x00pencil"))
	f.Add([]byte("\x00user\x00pencil\x00"))
	cred := rfcCredential(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, err := VerifyPlain(msg, func(user string) (ScramCredential, bool, error) {
			return cred, user == "user", nil
		})
		if err != nil {
			checkSentinel(t, err)
			if user != "" {
				t.Fatalf("failed PLAIN returned user %q", user)
			}
			return
		}
		parts := bytes.Split(msg, []byte{0})
		if user != "user" || len(parts) != 3 || string(parts[2]) != "pencil" || (len(parts[0]) > 0 && string(parts[0]) != "user") {
			t.Fatalf("%q accepted as %q", msg, user)
		}
	})
}
