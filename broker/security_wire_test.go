package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/wire"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/test/testcerts"
)

// principalRecorder replaces the Metadata handler with one that records
// the principal each request ran as.
type principalRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (p *principalRecorder) install(t apiTable) {
	e := t[3]
	e.handle = func(_ context.Context, rc *requestContext, _ kmsg.Request) (kmsg.Response, error) {
		p.mu.Lock()
		p.seen = append(p.seen, rc.principal+"@"+rc.listener)
		p.mu.Unlock()
		return kmsg.NewPtrMetadataResponse(), nil
	}
	t[3] = e
}

func (p *principalRecorder) principals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// scramStore is a metadata store on a fresh embedded etcd holding alice's
// SCRAM-SHA-512 credential for password "alice-secret".
func scramStore(t *testing.T) *metadata.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: metadatatest.StartEmbedded(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cred, err := auth.NewScramCredential(auth.MechScramSHA512, "alice-secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutScramCredential(ctx, "alice", cred); err != nil {
		t.Fatal(err)
	}
	return store
}

// metadataVia sends one Metadata request through a kgo client with opts.
func metadataVia(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

func TestSASLRefusesRequestsBeforeAuthentication(t *testing.T) {
	cfg := Config{Listeners: []ListenerConfig{{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Security: SASLPlaintext}}}
	var rec principalRecorder
	b := newWireBrokerConfig(t, cfg, nil, rec.install)

	c := dialWire(t, b)
	c.send(apiVersionsReq(3), 1) // allowed before authentication
	if corr, _, err := c.recv(false); err != nil || corr != 1 {
		t.Fatalf("ApiVersions before auth: corr %d err %v", corr, err)
	}
	c.send(kmsg.NewPtrMetadataRequest(), 2)
	c.expectClosed()

	// A frame above the pre-authentication bound is refused unread.
	c = dialWire(t, b)
	if _, err := c.nc.Write(binary.BigEndian.AppendUint32(nil, wire.PreAuthMaxRequestBytes+1)); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()

	// A handshake naming a mechanism the listener does not offer.
	c = dialWire(t, b)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	c.send(hs, 3)
	_, body, err := c.recv(false)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("handshake GSSAPI: error %d, mechanisms %v", resp.ErrorCode, resp.SupportedMechanisms)
	}
	c.expectClosed()
	if got := rec.principals(); len(got) != 0 {
		t.Fatalf("handler ran before authentication as %v", got)
	}
}

func TestSASLScramAndPlain(t *testing.T) {
	store := scramStore(t)
	cfg := Config{Listeners: []ListenerConfig{{Name: "CLIENT", Addr: "127.0.0.1:0", Security: SASLPlaintext,
		SASLMechanisms: []string{auth.MechPlain, auth.MechScramSHA256, auth.MechScramSHA512}}}}
	var rec principalRecorder
	b := newWireBrokerConfig(t, cfg, store, rec.install)
	addr := b.Addr().String()

	alice := scram.Auth{User: "alice", Pass: "alice-secret"}
	if err := metadataVia(t, addr, kgo.SASL(alice.AsSha512Mechanism())); err != nil {
		t.Fatalf("SCRAM-SHA-512 with the right password: %v", err)
	}
	if err := metadataVia(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())); err != nil {
		t.Fatalf("PLAIN with the right password: %v", err)
	}
	refused := map[string]sasl.Mechanism{
		"SCRAM-SHA-512 wrong password": scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism(),
		"SCRAM-SHA-512 unknown user":   scram.Auth{User: "mallory", Pass: "alice-secret"}.AsSha512Mechanism(),
		"SCRAM-SHA-256 no credential":  alice.AsSha256Mechanism(),
		"PLAIN wrong password":         plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
	}
	for name, m := range refused {
		err := metadataVia(t, addr, kgo.SASL(m))
		if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("%s: got %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	// SaslHandshake v0: the PLAIN token travels raw, then requests follow.
	c := dialWire(t, b)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, auth.MechPlain
	c.send(hs, 1)
	if _, _, err := c.recv(false); err != nil {
		t.Fatal(err)
	}
	token := []byte("\x00alice\x00alice-secret")
	if _, err := c.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)); err != nil {
		t.Fatal(err)
	}
	var reply [4]byte
	if _, err := io.ReadFull(c.br, reply[:]); err != nil || binary.BigEndian.Uint32(reply[:]) != 0 {
		t.Fatalf("raw PLAIN reply %v, %v; want an empty token", reply, err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	c.send(md, 2)
	if corr, _, err := c.recv(false); err != nil || corr != 2 {
		t.Fatalf("Metadata after raw PLAIN: corr %d, %v", corr, err)
	}

	want := []string{"User:alice@CLIENT", "User:alice@CLIENT", "User:alice@CLIENT"}
	if got := rec.principals(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("handler principals %v, want %v", got, want)
	}
}

func TestMTLSPrincipalFromCertificate(t *testing.T) {
	ca, err := testcerts.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := ca.TLSCert("broker", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := ca.TLSCert("alice")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	cfg := Config{Listeners: []ListenerConfig{{Name: "SSL", Addr: "127.0.0.1:0", Security: SSL, TLS: serverTLS}}}
	var rec principalRecorder
	b := newWireBrokerConfig(t, cfg, nil, rec.install)
	addr := b.Addr().String()

	withCert := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}
	if err := metadataVia(t, addr, kgo.DialTLSConfig(withCert)); err != nil {
		t.Fatalf("mTLS client: %v", err)
	}
	if err := metadataVia(t, addr, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()})); err == nil {
		t.Fatal("client without a certificate was served")
	}
	if err := metadataVia(t, addr); err == nil {
		t.Fatal("plaintext client was served on an SSL listener")
	}
	want := "User:CN=alice,O=Strata Test@SSL"
	if got := rec.principals(); len(got) != 1 || got[0] != want {
		t.Fatalf("principals %v, want [%s]", got, want)
	}
}

func TestConnectionLimitPerIP(t *testing.T) {
	b := newWireBrokerConfig(t, Config{MaxConnectionsPerIP: 2}, nil, nil)
	roundTrip := func(c *wireClient) error {
		c.send(apiVersionsReq(3), 1)
		_, _, err := c.recv(false)
		return err
	}
	first, second := dialWire(t, b), dialWire(t, b)
	for _, c := range []*wireClient{first, second} {
		if err := roundTrip(c); err != nil {
			t.Fatalf("connection within the limit: %v", err)
		}
	}
	third := dialWire(t, b)
	third.send(apiVersionsReq(3), 1)
	third.expectClosed()
	if s := b.ConnStats(); s.RefusedPerIP != 1 || s.Open != 2 {
		t.Fatalf("stats %+v, want 1 refused per IP and 2 open", s)
	}
	first.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for b.ConnStats().Open != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := roundTrip(dialWire(t, b)); err != nil {
		t.Fatalf("connection after one closed: %v", err)
	}
}

func TestThrottledResponseMutesTheConnection(t *testing.T) {
	const throttle = 400 * time.Millisecond
	var calls sync.Map
	b := newWireBrokerConfig(t, Config{}, nil, func(t apiTable) {
		e := t[3]
		e.handle = func(_ context.Context, rc *requestContext, _ kmsg.Request) (kmsg.Response, error) {
			calls.Store(rc.correlationID, time.Now())
			if rc.correlationID == 1 {
				rc.throttleMs = int32(throttle / time.Millisecond)
			}
			return kmsg.NewPtrMetadataResponse(), nil
		}
		t[3] = e
	})
	c := dialWire(t, b)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	// A client ignoring throttle_time_ms sends its next request at once;
	// the broker reads it only once the mute ends.
	for i := 1; i <= 2; i++ {
		c.send(req, int32(i))
		if corr, _, err := c.recv(false); err != nil || corr != int32(i) {
			t.Fatalf("response %d: corr %d err %v", i, corr, err)
		}
	}
	first, _ := calls.Load(int32(1))
	second, _ := calls.Load(int32(2))
	if gap := second.(time.Time).Sub(first.(time.Time)); gap < throttle {
		t.Fatalf("second request served %v after the throttled one, want ≥ %v", gap, throttle)
	}
}

func TestQueuedBytesAreReleased(t *testing.T) {
	b := newWireBrokerConfig(t, Config{QueuedMaxRequestBytes: 1 << 10}, nil, nil)
	c := dialWire(t, b)
	for i := int32(1); i <= 20; i++ { // 20 requests through a 1 KiB budget
		c.send(apiVersionsReq(3), i)
		if corr, _, err := c.recv(false); err != nil || corr != i {
			t.Fatalf("request %d: corr %d err %v", i, corr, err)
		}
	}
	c.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for b.queued.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.queued.InUse(); n != 0 {
		t.Fatalf("%d queued bytes still held after every request was answered", n)
	}
}
