package auth

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// users is an in-memory credential store for tests: user → mechanism → cred.
type users map[string]map[string]ScramCredential

func (u users) add(t testing.TB, user, password string, mechs ...string) {
	t.Helper()
	for _, mech := range mechs {
		c, err := NewScramCredential(mech, password, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if u[user] == nil {
			u[user] = map[string]ScramCredential{}
		}
		u[user][mech] = c
	}
}

// lookup serves mech's credential, as the broker does per mechanism.
func (u users) lookup(mech string) CredentialLookup {
	return func(user string) (ScramCredential, bool, error) {
		c, ok := u[user][mech]
		return c, ok, nil
	}
}

func franzMechanism(mech string, a scram.Auth) sasl.Mechanism {
	if mech == MechScramSHA256 {
		return a.AsSha256Mechanism()
	}
	return a.AsSha512Mechanism()
}

// runFranz drives franz-go's SCRAM client against a ScramServer in memory.
// It returns the server's error, or the client's if the server succeeded.
func runFranz(t *testing.T, mech string, store users, a scram.Auth) (*ScramServer, error) {
	t.Helper()
	server, err := NewScramServer(mech, store.lookup(mech))
	if err != nil {
		t.Fatal(err)
	}
	session, msg, err := franzMechanism(mech, a).Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; ; step++ {
		reply, done, err := server.Step(msg)
		if err != nil {
			return server, err
		}
		clientDone, next, err := session.Challenge(reply)
		if err != nil {
			return server, errors.New("client: " + err.Error())
		}
		if done != clientDone {
			t.Fatalf("step %d: server done %v, client done %v", step, done, clientDone)
		}
		if done {
			return server, nil
		}
		msg = next
	}
}

func TestScramFranzGoInterop(t *testing.T) {
	store := users{}
	names := []string{"alice", "we,ird=name", "ünï"}
	for _, n := range names {
		store.add(t, n, "s3cret-"+n, MechScramSHA256, MechScramSHA512)
	}
	for _, mech := range []string{MechScramSHA256, MechScramSHA512} {
		for _, name := range names {
			for _, zid := range []string{"", name} {
				t.Run(mech+"/"+name+"/zid="+zid, func(t *testing.T) {
					server, err := runFranz(t, mech, store, scram.Auth{User: name, Pass: "s3cret-" + name, Zid: zid})
					if err != nil {
						t.Fatalf("exchange failed: %v", err)
					}
					if server.User() != name {
						t.Fatalf("User() = %q, want %q", server.User(), name)
					}
				})
			}
		}
	}
}

func TestScramWrongPassword(t *testing.T) {
	store := users{}
	store.add(t, "alice", "right", MechScramSHA256, MechScramSHA512)
	for _, mech := range []string{MechScramSHA256, MechScramSHA512} {
		server, err := runFranz(t, mech, store, scram.Auth{User: "alice", Pass: "wrong"})
		if !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("%s: err %v, want ErrAuthFailed", mech, err)
		}
		if server.User() != "" {
			t.Fatalf("failed exchange reports user %q", server.User())
		}
	}
}

// A credential stored only for the other mechanism must not authenticate.
func TestScramOtherMechanismCredential(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA256)
	lookupAny := func(user string) (ScramCredential, bool, error) {
		c, ok := store[user][MechScramSHA256]
		return c, ok, nil
	}
	server, _ := NewScramServer(MechScramSHA512, lookupAny)
	session, first, _ := scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism().Authenticate(context.Background(), "")
	reply, _, err := server.Step(first)
	if err != nil {
		t.Fatal(err)
	}
	_, final, _ := session.Challenge(reply)
	if _, _, err := server.Step(final); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("err %v, want ErrAuthFailed", err)
	}
}

// RFC 7677 §3: the SCRAM-SHA-256 example exchange, byte for byte.
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := pbkdf2.Key(sha256.New, "pencil", salt, 4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := ScramCredentialFromSalted(MechScramSHA256, salt, 4096, salted)
	if err != nil {
		t.Fatal(err)
	}
	server, _ := NewScramServer(MechScramSHA256, users{"user": {MechScramSHA256: cred}}.lookup(MechScramSHA256))
	server.serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	reply, done, err := server.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: done %v err %v", done, err)
	}
	wantFirst := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	if string(reply) != wantFirst {
		t.Fatalf("server-first %q, want %q", reply, wantFirst)
	}
	final := "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	reply, done, err = server.Step([]byte(final))
	if err != nil || !done {
		t.Fatalf("client-final: done %v err %v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(reply) != want {
		t.Fatalf("server-final %q, want %q", reply, want)
	}
	if server.User() != "user" {
		t.Fatalf("User() = %q", server.User())
	}
}

// clientFinal computes a correct client-final message for any nonce, as a
// client that knows the password would: it lets a test tamper with the
// nonce and still present a proof consistent with what it sent.
func clientFinal(t *testing.T, mech, password, clientFirstBare, serverFirst, nonce string) string {
	t.Helper()
	newHash, _ := hashFor(mech)
	var salt []byte
	iterations := 0
	for _, f := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(f, "s="):
			salt, _ = base64.StdEncoding.DecodeString(f[2:])
		case strings.HasPrefix(f, "i="):
			iterations = atoiOrZero(f[2:])
		}
	}
	salted, err := pbkdf2.Key(newHash, password, salt, iterations, newHash().Size())
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacSum(newHash, salted, []byte("Client Key"))
	withoutProof := "c=biws,r=" + nonce
	signature := hmacSum(newHash, hashSum(newHash, clientKey), []byte(clientFirstBare+","+serverFirst+","+withoutProof))
	for i := range signature {
		signature[i] ^= clientKey[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(signature)
}

func atoiOrZero(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func serverNonceOf(t *testing.T, serverFirst []byte) string {
	t.Helper()
	nonce, _, _ := strings.Cut(strings.TrimPrefix(string(serverFirst), "r="), ",")
	return nonce
}

// CVE-2024-56128: the server must check that the client-final nonce is the
// one it issued, even when the proof is consistent with the message.
func TestScramTamperedNonceRejected(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA256)
	tampers := map[string]func(issued string) string{
		"client nonce only":     func(string) string { return "clientnonce" },
		"server part replaced":  func(string) string { return "clientnonce" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" },
		"extra suffix":          func(issued string) string { return issued + "x" },
		"truncated":             func(issued string) string { return issued[:len(issued)-1] },
		"different client part": func(issued string) string { return "X" + issued[1:] },
		"other prefix":          func(issued string) string { return "clientnonceX" + issued },
	}
	for name, tamper := range tampers {
		t.Run(name, func(t *testing.T) {
			server, _ := NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
			bare := "n=alice,r=clientnonce"
			first, _, err := server.Step([]byte("n,," + bare))
			if err != nil {
				t.Fatal(err)
			}
			issued := serverNonceOf(t, first)
			// Sanity: the untampered final message with this helper succeeds.
			control, _ := NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
			control.serverNonce = func() string { return strings.TrimPrefix(issued, "clientnonce") }
			controlFirst, _, _ := control.Step([]byte("n,," + bare))
			if _, done, err := control.Step([]byte(clientFinal(t, MechScramSHA256, "pw", bare, string(controlFirst), issued))); !done || err != nil {
				t.Fatalf("control exchange failed: %v", err)
			}
			final := clientFinal(t, MechScramSHA256, "pw", bare, string(first), tamper(issued))
			if _, done, err := server.Step([]byte(final)); done || !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("tampered nonce: done %v err %v, want ErrAuthFailed", done, err)
			}
		})
	}
}

// librdkafka before 2.10 echoes the client nonce before the issued one
// (Kafka accepts it); that form, and only that one, passes too.
func TestScramLibrdkafkaRepeatedClientNonce(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA512)
	server, _ := NewScramServer(MechScramSHA512, store.lookup(MechScramSHA512))
	bare := "n=alice,r=clientnonce"
	first, _, err := server.Step([]byte("n,," + bare))
	if err != nil {
		t.Fatal(err)
	}
	final := clientFinal(t, MechScramSHA512, "pw", bare, string(first), "clientnonce"+serverNonceOf(t, first))
	if _, done, err := server.Step([]byte(final)); !done || err != nil {
		t.Fatalf("repeated client nonce: done %v err %v", done, err)
	}
}

// An unknown user gets a plausible, stable challenge and fails only at the
// proof.
func TestScramUnknownUserFailsAtProof(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA512)
	firstOf := func(user string) string {
		server, _ := NewScramServer(MechScramSHA512, store.lookup(MechScramSHA512))
		reply, _, err := server.Step([]byte("n,,n=" + user + ",r=abc"))
		if err != nil {
			t.Fatalf("client-first for %q: %v", user, err)
		}
		_, rest, _ := strings.Cut(string(reply), ",")
		return rest // s=...,i=...
	}
	ghost1, ghost2, other := firstOf("ghost"), firstOf("ghost"), firstOf("ghost2")
	if ghost1 != ghost2 {
		t.Fatalf("unknown user's salt changes between attempts: %q vs %q", ghost1, ghost2)
	}
	if ghost1 == other {
		t.Fatalf("two unknown users share salt %q", ghost1)
	}
	salt, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.Split(ghost1, ",")[0], "s="))
	if len(salt) != saltSize || !strings.HasSuffix(ghost1, ",i=8192") {
		t.Fatalf("unknown user's challenge %q does not look like a real one", ghost1)
	}
	server, err := runFranz(t, MechScramSHA512, store, scram.Auth{User: "ghost", Pass: "pw"})
	if !errors.Is(err, ErrAuthFailed) || server.state != scramFailed {
		t.Fatalf("unknown user: err %v, want ErrAuthFailed at the proof", err)
	}
}

func TestScramMalformedFirst(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA256)
	cases := map[string]error{
		"":                                      ErrBadMessage,
		"x":                                     ErrBadMessage,
		"n,":                                    ErrBadMessage,
		"n,,":                                   ErrBadMessage,
		"n,,n=alice":                            ErrBadMessage,
		"n,,r=abc,n=alice":                      ErrBadMessage,
		"n,,n=,r=abc":                           ErrBadMessage,
		"n,,n=al=ice,r=abc":                     ErrBadMessage,
		"n,,n=al=2Xice,r=abc":                   ErrBadMessage,
		"n,,n=alice,r=":                         ErrBadMessage,
		"n,,n=alice,r=a b":                      ErrBadMessage,
		"n,,n=alice,r=a\x00b":                   ErrBadMessage,
		"n,,n=\xff\xfe,r=abc":                   ErrBadMessage,
		"n,,m=ext,n=alice,r=abc":                ErrBadMessage,
		"n,,n=alice,r=abc,tokenauth=true":       ErrBadMessage,
		"n,,n=alice,r=abc,x=1":                  ErrBadMessage,
		"n,x=1,n=alice,r=abc":                   ErrBadMessage,
		"n,a=,n=alice,r=abc":                    ErrBadMessage,
		"n,a=bob,n=alice,r=abc":                 ErrAuthFailed,
		"p=tls-unique,,n=alice,r=abc":           ErrBadMessage, // channel binding required by the client
		"p=tls-server-end-point,,n=alice,r=abc": ErrBadMessage,
		"y,,n=alice,r=abc":                      ErrBadMessage,
	}
	for msg, want := range cases {
		server, _ := NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
		reply, done, err := server.Step([]byte(msg))
		if !errors.Is(err, want) || reply != nil || done {
			t.Errorf("%q: reply %q done %v err %v, want %v", msg, reply, done, err, want)
		}
		if _, _, err := server.Step([]byte("c=biws,r=abc,p=AAAA")); err == nil {
			t.Errorf("%q: a failed exchange accepted another message", msg)
		}
	}
}

func TestScramMalformedFinal(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA256)
	const bare = "n=alice,r=abc"
	goodProof := base64.StdEncoding.EncodeToString(make([]byte, 32))
	cases := []func(nonce string) string{
		func(string) string { return "" },
		func(n string) string { return "c=biws,r=" + n },
		func(n string) string { return "c=biws,r=" + n + ",p=!!notbase64" },
		func(n string) string {
			return "c=biws,r=" + n + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 31))
		},
		func(n string) string { return "c=eSws,r=" + n + ",p=" + goodProof },             // claims gs2 "y,,"
		func(n string) string { return "c=biws,r=" + n + ",x=1,p=" + goodProof },         // extension
		func(n string) string { return "r=" + n + ",c=biws,p=" + goodProof },             // order
		func(n string) string { return "c=biws,r=" + n + ",p=" + goodProof + ",p=AAAA" }, // trailing junk
	}
	for i, mk := range cases {
		server, _ := NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
		first, _, err := server.Step([]byte("n,," + bare))
		if err != nil {
			t.Fatal(err)
		}
		msg := mk(serverNonceOf(t, first))
		if reply, done, err := server.Step([]byte(msg)); !errors.Is(err, ErrBadMessage) || done || reply != nil {
			t.Errorf("case %d %q: done %v err %v, want ErrBadMessage", i, msg, done, err)
		}
	}
}

func TestScramOversizedMessages(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA256)
	prefix := "n,,n=alice,r="
	atLimit := prefix + strings.Repeat("a", MaxMessageSize-len(prefix))
	server, _ := NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
	if _, _, err := server.Step([]byte(atLimit)); err != nil {
		t.Fatalf("message of exactly %d bytes refused: %v", MaxMessageSize, err)
	}
	server, _ = NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
	if _, _, err := server.Step([]byte(atLimit + "a")); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("client-first of %d bytes: err %v, want ErrBadMessage", len(atLimit)+1, err)
	}
	server, _ = NewScramServer(MechScramSHA256, store.lookup(MechScramSHA256))
	if _, _, err := server.Step([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := server.Step(make([]byte, MaxMessageSize+1)); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("oversized client-final: err %v, want ErrBadMessage", err)
	}
}

func TestScramStepAfterDone(t *testing.T) {
	store := users{}
	store.add(t, "alice", "pw", MechScramSHA256)
	server, err := runFranz(t, MechScramSHA256, store, scram.Auth{User: "alice", Pass: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := server.Step([]byte("n,,n=alice,r=abc")); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("step after done: err %v", err)
	}
	if server.User() != "" {
		t.Fatalf("a server that refused a message still reports user %q", server.User())
	}
}

func TestScramLookupError(t *testing.T) {
	boom := errors.New("etcd down")
	server, _ := NewScramServer(MechScramSHA256, func(string) (ScramCredential, bool, error) { return ScramCredential{}, false, boom })
	if _, _, err := server.Step([]byte("n,,n=alice,r=abc")); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the lookup's error", err)
	}
}

func TestScramCredentialBounds(t *testing.T) {
	if _, err := NewScramServer("SCRAM-SHA-1", users{}.lookup("x")); !errors.Is(err, ErrUnknownMechanism) {
		t.Fatalf("SCRAM-SHA-1: %v", err)
	}
	for _, it := range []int{MinIterations - 1, MaxIterations + 1, -1} {
		if _, err := NewScramCredential(MechScramSHA256, "pw", it); !errors.Is(err, ErrInvalidCredential) {
			t.Errorf("%d iterations: err %v", it, err)
		}
	}
	if _, err := NewScramCredential(MechScramSHA256, "", 0); !errors.Is(err, ErrInvalidCredential) {
		t.Errorf("empty password: err %v", err)
	}
	c, err := NewScramCredential(MechScramSHA512, "pw", 0)
	if err != nil || c.Iterations != DefaultIterations || len(c.Salt) != saltSize || len(c.StoredKey) != 64 {
		t.Fatalf("default credential %+v err %v", c, err)
	}
	c2, _ := NewScramCredential(MechScramSHA512, "pw", 0)
	if string(c2.Salt) == string(c.Salt) {
		t.Fatal("two credentials share a salt")
	}
	bad := c
	bad.StoredKey = bad.StoredKey[:10]
	if err := bad.Validate(); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("short key: %v", err)
	}
}
