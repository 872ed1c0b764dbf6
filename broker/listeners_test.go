package broker

import (
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
	"github.com/strata-log/strata/metadata"
)

func TestConfigValidateListeners(t *testing.T) {
	base := Config{NodeID: 1, DataDir: t.TempDir()}
	ok := base
	ok.Listeners = []ListenerConfig{{Name: "A", Addr: "127.0.0.1:0", Security: SASLPlaintext}, {Name: "B", Addr: "127.0.0.1:0", Security: Plaintext}}
	ok.InterBrokerListener = "B"
	if err := ok.withDefaults().Validate(); err != nil {
		t.Fatalf("valid listeners rejected: %v", err)
	}
	bad := map[string]func(c *Config){
		"TLS without certificate": func(c *Config) { c.Listeners[0].Security = SASLSSL },
		"unknown inter-broker":    func(c *Config) { c.InterBrokerListener = "C" },
		"unknown mechanism":       func(c *Config) { c.Listeners[0].SASLMechanisms = []string{"GSSAPI"} },
		"duplicate names":         func(c *Config) { c.Listeners[1].Name = "A" },
		"negative connections":    func(c *Config) { c.MaxConnectionsPerIP = -1 },
	}
	for name, edit := range bad {
		c := ok
		c.Listeners = append([]ListenerConfig(nil), ok.Listeners...)
		edit(&c)
		if err := c.withDefaults().Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
	// Without Listeners: the PLAINTEXT listener of Listen.
	ls := base.withDefaults().listeners()
	if len(ls) != 1 || ls[0].Name != "PLAINTEXT" || ls[0].Addr != "127.0.0.1:9092" || ls[0].Security != Plaintext {
		t.Fatalf("default listeners %+v", ls)
	}
}

func TestRewriteEndpointsUsesTheClientsListener(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: 1}}
	b.listeners = []*listener{{Config: ListenerConfig{Name: "CLIENT"}}, {Config: ListenerConfig{Name: "INTERNAL"}}}
	b.advertised = metadata.BrokerInfo{NodeID: 1, Host: "c1", Port: 1,
		Endpoints: map[string]string{"CLIENT": "c1:1", "INTERNAL": "i1:11"}}
	b.liveBrks.set([]metadata.BrokerInfo{b.advertised,
		{NodeID: 2, Host: "c2", Port: 2, Endpoints: map[string]string{"CLIENT": "c2:2", "INTERNAL": "i2:22"}},
		{NodeID: 3, Host: "old3", Port: 3}, // registered before listener names
	})
	meta := func() *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		for _, n := range []struct {
			id   int32
			host string
			port int32
		}{{1, "c1", 1}, {2, "c2", 2}, {3, "old3", 3}} {
			br := kmsg.NewMetadataResponseBroker()
			br.NodeID, br.Host, br.Port = n.id, n.host, n.port
			r.Brokers = append(r.Brokers, br)
		}
		return r
	}
	r := meta()
	b.rewriteEndpoints("INTERNAL", r)
	got := map[int32]string{}
	for _, br := range r.Brokers {
		got[br.NodeID] = net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
	}
	want := map[int32]string{1: "i1:11", 2: "i2:22", 3: "old3:3"}
	for id, addr := range want {
		if got[id] != addr {
			t.Errorf("INTERNAL: broker %d at %s, want %s", id, got[id], addr)
		}
	}
	r = meta()
	b.rewriteEndpoints("CLIENT", r)
	if r.Brokers[1].Host != "c2" || r.Brokers[1].Port != 2 {
		t.Errorf("CLIENT listener rewritten: %+v", r.Brokers[1])
	}
	fc := kmsg.NewPtrFindCoordinatorResponse()
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.NodeID, c.Host, c.Port = 2, "c2", 2
	fc.Coordinators = append(fc.Coordinators, c)
	b.rewriteEndpoints("INTERNAL", fc)
	if fc.Coordinators[0].Host != "i2" || fc.Coordinators[0].Port != 22 {
		t.Errorf("FindCoordinator not rewritten: %+v", fc.Coordinators[0])
	}
}

func TestPeerAddressUsesTheInterBrokerListener(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: 1, InterBrokerListener: "INTERNAL", PeerAddresses: map[int32]string{3: "proxy:3"}}}
	b.advertised = metadata.BrokerInfo{NodeID: 1, Host: "c1", Port: 1}
	b.liveBrks.set([]metadata.BrokerInfo{b.advertised,
		{NodeID: 2, Host: "c2", Port: 2, Endpoints: map[string]string{"CLIENT": "c2:2", "INTERNAL": "i2:22"}},
		{NodeID: 3, Host: "c3", Port: 3, Endpoints: map[string]string{"INTERNAL": "i3:33"}},
		{NodeID: 4, Host: "old4", Port: 4},
	})
	for node, want := range map[int32]string{2: "i2:22", 3: "proxy:3", 4: "old4:4", 5: ""} {
		if got := newPeerDialer(b).Address(node); got != want {
			t.Errorf("peer %d at %q, want %q", node, got, want)
		}
	}
}

func TestConnectionLimitSparesTheInterBrokerListener(t *testing.T) {
	b := &Broker{cfg: Config{MaxConnections: 1, InterBrokerListener: "INTERNAL"}}
	b.listeners = []*listener{{Config: ListenerConfig{Name: "CLIENT"}}, {Config: ListenerConfig{Name: "INTERNAL"}}}
	b.connLimits = wire.NewConnLimiter(wire.ConnLimits{MaxConnections: b.cfg.MaxConnections})
	admitConn := func(host, listenerName string) bool {
		return b.connLimits.Admit(host, b.exemptFromMaxConnections(listenerName))
	}
	if !admitConn("10.0.0.1", "CLIENT") {
		t.Fatal("first client refused")
	}
	if admitConn("10.0.0.2", "CLIENT") {
		t.Fatal("client beyond max connections admitted")
	}
	if !admitConn("10.0.0.3", "INTERNAL") {
		t.Fatal("peer refused by the broker-wide limit")
	}
	if counts := b.ConnStats(); counts.Open != 2 || counts.RefusedTotal != 1 {
		t.Fatalf("counts %+v", counts)
	}
	b.connLimits.Release("10.0.0.1")
	b.connLimits.Release("10.0.0.3")
	// (that no per-IP entry is left is wire's TestConnLimiter)
	if counts := b.ConnStats(); counts.Open != 0 {
		t.Fatalf("counts after release %+v", counts)
	}
}

func TestPeerDialerSpeaksTheInterBrokerListenersProtocol(t *testing.T) {
	creds := InterBrokerSASL{Mechanism: "PLAIN", Username: "broker", Password: "s3cret"}
	for _, tc := range []struct {
		protocol  SecurityProtocol
		tls, sasl bool
	}{{Plaintext, false, false}, {SASLPlaintext, false, true}, {SSL, true, false}, {SASLSSL, true, true}} {
		b := &Broker{cfg: Config{InterBrokerListener: "INTERNAL", InterBrokerSASL: creds, Listeners: []ListenerConfig{
			{Name: "CLIENT", Security: SASLSSL}, {Name: "INTERNAL", Security: tc.protocol}}}}
		sec := newPeerDialer(b).Security
		if sec.TLS != tc.tls || (sec.SASL != nil) != tc.sasl || (tc.sasl && *sec.SASL != creds) {
			t.Errorf("%s: peer security %+v", tc.protocol, sec)
		}
	}
}

// TestAdvertisedHTTP: the registered HTTP address takes the Kafka host
// when the configured one names none; a bad or portless one is refused.
func TestAdvertisedHTTP(t *testing.T) {
	for _, c := range []struct{ advertise, kafkaHost, want string }{
		{"", "k1", ""},
		{":9644", "k1", "k1:9644"},
		{":9644", "::1", "[::1]:9644"},
		{"h1:9644", "k1", "h1:9644"},
	} {
		if got := advertisedHTTP(c.advertise, c.kafkaHost); got != c.want {
			t.Errorf("advertisedHTTP(%q, %q) = %q, want %q", c.advertise, c.kafkaHost, got, c.want)
		}
	}
	base := Config{NodeID: 1, DataDir: t.TempDir()}
	for _, bad := range []string{"h1", "h1:0", "h1:x"} {
		cfg := base
		cfg.AdvertiseHTTP = bad
		if err := cfg.withDefaults().Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("AdvertiseHTTP %q: %v, want ErrInvalidConfig", bad, err)
		}
	}
}
