package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestVerifyPlain(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw-a", MechScramSHA512)
	store.add(t, "bob", "pw-b", MechScramSHA256)
	// The broker's lookup: SCRAM-SHA-512 if stored, else SCRAM-SHA-256.
	lookup := func(user string) (ScramCredential, bool, error) {
		if c, ok := store[user][MechScramSHA512]; ok {
			return c, true, nil
		}
		c, ok := store[user][MechScramSHA256]
		return c, ok, nil
	}
	cases := []struct {
		msg      string
		wantUser string
		wantErr  error
	}{
		{"\x00alice\x00pw-a", "alice", nil},
		{"alice\x00alice\x00pw-a", "alice", nil},
		{"\x00bob\x00pw-b", "bob", nil},
		{"\x00alice\x00pw-b", "", ErrAuthFailed},
		{"\x00alice\x00pw-a ", "", ErrAuthFailed},
		{"\x00ghost\x00pw-a", "", ErrAuthFailed},
		{"bob\x00alice\x00pw-a", "", ErrAuthFailed},
		{"", "", ErrBadMessage},
		{"alice", "", ErrBadMessage},
		{"alice\x00pw-a", "", ErrBadMessage},
		{"\x00alice\x00pw-a\x00", "", ErrBadMessage},
		{"\x00\x00pw-a", "", ErrBadMessage},
		{"\x00alice\x00", "", ErrBadMessage},
		{"\x00\xff\x00pw", "", ErrBadMessage},
		{"\x00alice\x00" + strings.Repeat("x", MaxMessageSize), "", ErrBadMessage},
	}
	for _, c := range cases {
		user, err := VerifyPlain([]byte(c.msg), lookup)
		if user != c.wantUser || !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
			t.Errorf("%q: user %q err %v, want %q %v", c.msg, user, err, c.wantUser, c.wantErr)
		}
	}
	boom := errors.New("etcd down")
	if _, err := VerifyPlain([]byte("\x00alice\x00pw-a"), func(string) (ScramCredential, bool, error) {
		return ScramCredential{}, false, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("lookup error: %v", err)
	}
	// A corrupt stored credential never authenticates, whatever the password.
	corrupt := store["alice"][MechScramSHA512]
	corrupt.Iterations = 1
	if _, err := VerifyPlain([]byte("\x00alice\x00pw-a"), func(string) (ScramCredential, bool, error) {
		return corrupt, true, nil
	}); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("corrupt credential: %v", err)
	}
}
