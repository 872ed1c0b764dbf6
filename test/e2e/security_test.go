package e2e

// Issue 9 transport security against the real binary: SASL_SSL with
// SCRAM (franz-go and kcat/librdkafka), refusal of unauthenticated and
// wrongly authenticated clients, mTLS principals on an SSL listener, and a
// three-broker cluster replicating over a SASL_SSL inter-broker listener.

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/test/testcerts"
)

// secureEnv is the CA, the broker's certificate files and the bootstrap
// users of a secured test cluster.
type secureEnv struct {
	ca        *testcerts.CA
	files     testcerts.Files // ca.pem, broker.pem, broker-key.pem
	usersFile string
	passFile  string // the inter-broker user's password
}

// Users of the bootstrap file, as user → password.
var secureUsers = map[string]string{"alice": "alice-secret", "broker": "broker-secret"}

func newSecureEnv(t *testing.T) *secureEnv {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcerts.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.WriteFiles(dir, "broker", "broker", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	env := &secureEnv{ca: ca, files: files,
		usersFile: filepath.Join(dir, "users.txt"), passFile: filepath.Join(dir, "broker-password")}
	var lines []string
	for user, pass := range secureUsers {
		lines = append(lines, user+":"+pass)
	}
	writeFile(t, env.usersFile, "# bootstrap users\n"+strings.Join(lines, "\n")+"\n")
	writeFile(t, env.passFile, secureUsers["broker"]+"\n")
	return env
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsArgs are the broker's certificate flags.
func (e *secureEnv) tlsArgs() []string {
	return []string{"--ssl-cert-file", e.files.Cert, "--ssl-key-file", e.files.Key, "--ssl-ca-file", e.files.CA}
}

// saslArgs are tlsArgs plus the users and the inter-broker identity.
func (e *secureEnv) saslArgs() []string {
	return append(e.tlsArgs(), "--sasl-bootstrap-users", e.usersFile, "--sasl-enabled-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512",
		"--inter-broker-sasl-mechanism", "SCRAM-SHA-512", "--inter-broker-sasl-username", "broker",
		"--inter-broker-sasl-password-file", e.passFile)
}

// clientTLS trusts the test CA.
func (e *secureEnv) clientTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: e.ca.Pool()}
}

// scramOpts are a franz-go client's TLS and SCRAM-SHA-512 options.
func (e *secureEnv) scramOpts(user, pass string) []kgo.Opt {
	return []kgo.Opt{kgo.DialTLSConfig(e.clientTLS()), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}
}

// probeMetadata sends one Metadata request straight to addr and returns
// the client's error (nil: the broker served it).
func probeMetadata(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// produceConsume creates topic through cl, produces n records with acks=all
// and reads them back from the start with a fresh client made by newClient.
func produceConsume(t *testing.T, newClient func(...kgo.Opt) *kgo.Client, topic string, rf int16, n int) {
	t.Helper()
	ctx := testCtx(t, 90*time.Second)
	adm := kadm.NewClient(newClient())
	if resp, err := adm.CreateTopic(ctx, 1, rf, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	producer := newClient(kgo.RequiredAcks(kgo.AllISRAcks()))
	var records []*kgo.Record
	for i := 0; i < n; i++ {
		records = append(records, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("secure-%d", i))})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	consumer := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	for len(got) < n {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: %d of %d records before the timeout", topic, len(got), n)
		}
		fetches.EachError(func(tp string, p int32, err error) { t.Fatalf("consume %s[%d]: %v", tp, p, err) })
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := fmt.Sprintf("secure-%d", i); v != want {
			t.Fatalf("record %d is %q, want %q", i, v, want)
		}
	}
}

func TestSecuritySASLSSL(t *testing.T) {
	env := newSecureEnv(t)
	b := StartBroker(t, withListeners(Listener{Name: "SASL_SSL", Protocol: "SASL_SSL"}), withArgs(env.saslArgs()...))
	if strings.Contains(b.Log(), "alice-secret") || strings.Contains(b.Log(), "broker-secret") {
		t.Fatal("a bootstrap password appears in the broker log")
	}

	t.Run("refused", func(t *testing.T) {
		refused := map[string][]kgo.Opt{
			"plaintext client":      nil,
			"TLS without SASL":      {kgo.DialTLSConfig(env.clientTLS())},
			"wrong password":        env.scramOpts("alice", "not-her-password"),
			"unknown user":          env.scramOpts("mallory", "alice-secret"),
			"untrusted certificate": {kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())},
		}
		for name, opts := range refused {
			err := probeMetadata(t, b.Addr, opts...)
			if err == nil {
				t.Errorf("%s: served", name)
				continue
			}
			if strings.HasPrefix(name, "wrong") || strings.HasPrefix(name, "unknown") {
				if !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
					t.Errorf("%s: got %v, want SASL_AUTHENTICATION_FAILED", name, err)
				}
			}
		}
		if err := b.waitLogLine("closing connection: request before SASL authentication", 10*time.Second); err != nil {
			t.Errorf("TLS client without SASL: %v", err)
		}
	})

	t.Run("franz-go SCRAM-SHA-512", func(t *testing.T) {
		produceConsume(t, func(opts ...kgo.Opt) *kgo.Client {
			return b.Client(append(env.scramOpts("alice", "alice-secret"), opts...)...)
		}, "secure-franz", 1, 200)
		if !logHasLine(b.Log(), `msg="client authenticated"`, "listener=SASL_SSL", "principal=User:alice method=SCRAM-SHA-512") {
			t.Fatal("no SCRAM-SHA-512 authentication of alice in the broker log")
		}
	})

	t.Run("kcat SCRAM-SHA-512", func(t *testing.T) {
		kcat := testkit.NeedBinary(t, "kcat")
		conf := []string{"-b", b.Addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=" + env.files.CA}
		const topic = "secure-kcat"
		var lines []string
		for i := 0; i < 100; i++ {
			lines = append(lines, fmt.Sprintf("kcat line %d", i))
		}
		input := strings.Join(lines, "\n") + "\n"
		runKcat(t, kcat, input, append(conf, "-P", "-t", topic, "-p", "0")...)
		got := runKcat(t, kcat, "", append(conf, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")...)
		if got != input {
			t.Fatalf("kcat read back %d bytes, want the %d produced:\n%.1000s", len(got), len(input), got)
		}
		meta := runKcat(t, kcat, "", append(conf, "-L")...)
		if want := fmt.Sprintf("broker %d at %s", b.NodeID, b.Addr); !strings.Contains(meta, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, meta)
		}
	})
}

func TestSecurityMTLSPrincipal(t *testing.T) {
	env := newSecureEnv(t)
	b := StartBroker(t, withListeners(Listener{Name: "SSL", Protocol: "SSL"}),
		withArgs(append(env.tlsArgs(), "--ssl-client-auth", "required")...))
	aliceCert, err := env.ca.TLSCert("alice")
	if err != nil {
		t.Fatal(err)
	}
	withCert := env.clientTLS()
	withCert.Certificates = []tls.Certificate{aliceCert}

	if err := probeMetadata(t, b.Addr, kgo.DialTLSConfig(env.clientTLS())); err == nil {
		t.Fatal("a client without a certificate was served with ssl.client.auth=required")
	}
	produceConsume(t, func(opts ...kgo.Opt) *kgo.Client {
		return b.Client(append([]kgo.Opt{kgo.DialTLSConfig(withCert)}, opts...)...)
	}, "mtls-topic", 1, 50)
	if !logHasLine(b.Log(), `msg="client authenticated"`, "listener=SSL", `principal="User:CN=alice,O=Strata Test" method=mTLS`) {
		t.Fatal("no authentication of the certificate's subject in the broker log")
	}
}

func TestSecurityInterBrokerSASLSSL(t *testing.T) {
	env := newSecureEnv(t)
	objects := "file://" + filepath.Join(t.TempDir(), "objects")
	listeners := func() brokerOpt {
		return withListeners(Listener{Name: "CLIENT", Protocol: "SASL_SSL"}, Listener{Name: "INTERNAL", Protocol: "SASL_SSL"})
	}
	common := append(env.saslArgs(), "--inter-broker-listener-name", "INTERNAL", "--object-store", objects,
		"--lease-ttl", "3s", "--offsets-topic-replication-factor", "3", "--durability", "replication")
	etcd := clusterEtcd(t) // outlives the leader killed below
	b1 := StartBroker(t, listeners(), withArgs(common...), withEtcd(etcd))
	brokers := []*Broker{b1}
	for id := 2; id <= 3; id++ {
		brokers = append(brokers, StartBroker(t, listeners(), withArgs(common...), withEtcd(etcd),
			func(b *Broker) { b.NodeID, b.Cluster = id, b1.Cluster }))
	}
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr)
	}
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		return b1.Client(append(append(env.scramOpts("alice", "alice-secret"), kgo.SeedBrokers(seeds...)), opts...)...)
	}
	waitBrokers(t, newClient, 3)
	// Metadata names each broker by the listener the client came in on.
	for _, name := range []string{"CLIENT", "INTERNAL"} {
		cl := b1.Client(append(env.scramOpts("alice", "alice-secret"), kgo.SeedBrokers(b1.ListenerAddr(name)))...)
		meta, err := kadm.NewClient(cl).BrokerMetadata(testCtx(t, 30*time.Second))
		if err != nil {
			t.Fatalf("metadata on %s: %v", name, err)
		}
		for _, mb := range meta.Brokers {
			want := brokers[mb.NodeID-1].ListenerAddr(name)
			if got := fmt.Sprintf("%s:%d", mb.Host, mb.Port); got != want {
				t.Errorf("metadata on %s: broker %d at %s, want %s", name, mb.NodeID, got, want)
			}
		}
	}
	const topic = "replicated-secure"
	produceConsume(t, newClient, topic, 3, 300)
	leader := waitFullISR(t, newClient, topic)

	// The followers fetched from the leader on its INTERNAL listener, as
	// the inter-broker user.
	var lead *Broker
	for _, b := range brokers {
		if int32(b.NodeID) == leader {
			lead = b
		}
	}
	if !logHasLine(lead.Log(), `msg="client authenticated"`, "listener=INTERNAL", "principal=User:broker method=SCRAM-SHA-512") {
		t.Fatal("no peer authenticated as User:broker on the leader's INTERNAL listener")
	}
	if logHasLine(lead.Log(), `msg="client authenticated"`, "listener=CLIENT", "principal=User:broker") {
		t.Fatal("a peer connected on the client listener")
	}
	// The data survive the leader: read them from the new one.
	lead.Kill()
	var survivors []string
	for _, b := range brokers {
		if b != lead {
			survivors = append(survivors, b.Addr)
		}
	}
	consumer := b1.Client(append(env.scramOpts("alice", "alice-secret"), kgo.SeedBrokers(survivors...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	ctx := testCtx(t, 90*time.Second)
	n := 0
	for n < 300 && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		n += len(fetches.Records())
	}
	if n < 300 {
		t.Fatalf("read %d of 300 records after the leader died", n)
	}
}

// logHasLine reports whether one line of log contains every part.
func logHasLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// waitBrokers waits until Metadata lists n brokers.
func waitBrokers(t *testing.T, newClient func(...kgo.Opt) *kgo.Client, n int) {
	t.Helper()
	adm := kadm.NewClient(newClient(kgo.MetadataMinAge(50 * time.Millisecond)))
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		meta, err := adm.BrokerMetadata(ctx)
		cancel()
		if err == nil && len(meta.Brokers) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata never listed %d brokers: %+v %v", n, meta.Brokers, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitFullISR waits until partition 0 of topic has three in-sync replicas
// and returns its leader.
func waitFullISR(t *testing.T, newClient func(...kgo.Opt) *kgo.Client, topic string) int32 {
	t.Helper()
	adm := kadm.NewClient(newClient(kgo.MetadataMinAge(50 * time.Millisecond)))
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		meta, err := adm.Metadata(ctx, topic)
		cancel()
		if err == nil {
			if p, ok := meta.Topics[topic].Partitions[0]; ok && len(p.ISR) == 3 {
				return p.Leader
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 of %s never had 3 in-sync replicas: %+v %v", topic, meta.Topics[topic], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
