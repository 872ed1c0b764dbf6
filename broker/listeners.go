package broker

// Named listeners (issue 9), configured as Kafka's listeners,
// advertised.listeners and listener.security.protocol.map:
//
//	listeners:      NAME://host:port,...      (empty host: every interface; port 0: any free port)
//	advertised:     NAME://host:port,...      (default: the listener's own address, the bound port)
//	protocol map:   NAME:PROTOCOL,...         (default: a name that is a protocol maps to itself)
//
// Each listener is registered in metadata.BrokerInfo.Endpoints under its
// name; BrokerInfo.Host/Port is the first listener's endpoint. Clients get,
// in Metadata and every other answer naming brokers, the endpoints of the
// listener they connected on; peers connect to the inter-broker listener.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// SecurityProtocol is a listener's Kafka security protocol.
type SecurityProtocol string

// The security protocols of Kafka.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// ErrBadListener is returned for listener specifications that cannot work.
var ErrBadListener = errors.New("broker: bad listener")

// usesTLS: the connection is a TLS server connection.
func (p SecurityProtocol) usesTLS() bool { return p == SSL || p == SASLSSL }

// usesSASL: the client must authenticate with SASL before any other request.
func (p SecurityProtocol) usesSASL() bool { return p == SASLPlaintext || p == SASLSSL }

func (p SecurityProtocol) valid() bool {
	return p == Plaintext || p == SSL || p == SASLPlaintext || p == SASLSSL
}

// ListenerConfig is one named listener.
type ListenerConfig struct {
	// Name is the listener name (upper case; "PLAINTEXT", "INTERNAL"...).
	Name string
	// Addr is the host:port to bind (empty host: every interface).
	Addr string
	// Advertise is the host:port registered for clients and peers.
	// Default: Addr with the bound port (the host name when Addr binds
	// every interface).
	Advertise string
	// Security is the listener's protocol.
	Security SecurityProtocol
	// TLS is the server configuration of SSL and SASL_SSL listeners
	// (required there, ignored elsewhere). ClientAuth set to
	// RequireAndVerifyClientCert (or VerifyClientCertIfGiven) makes it
	// mTLS: on an SSL listener the principal is then "User:" + the client
	// certificate's subject.
	TLS *tls.Config
	// SASLMechanisms are the mechanisms a SASL listener offers (PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512). Default: the two SCRAM mechanisms.
	SASLMechanisms []string
}

// InterBrokerSASL is how this broker authenticates to peers on a SASL
// inter-broker listener. Password is a secret: never log it.
type InterBrokerSASL struct {
	Mechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	Username  string
	Password  string
}

// String hides the password (the config may be logged).
func (s InterBrokerSASL) String() string {
	return fmt.Sprintf("{%s %s ***}", s.Mechanism, s.Username)
}

// maxListeners bounds the named listeners of one broker (the registration
// carries one endpoint each).
const maxListeners = metadata.MaxBrokerEndpoints

var listenerNameRE = regexp.MustCompile(`^[A-Z0-9_-]{1,64}$`)

// ParseListeners parses Kafka's listeners, advertised.listeners and
// listener.security.protocol.map settings (formats above) into listener
// configs, in the order of listeners. TLS and mechanisms are left for the
// caller to fill in.
func ParseListeners(listeners, advertised, protocolMap string) ([]ListenerConfig, error) {
	protocols, err := parseProtocolMap(protocolMap)
	if err != nil {
		return nil, err
	}
	binds, names, err := parseEndpointList("listeners", listeners)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no listeners", ErrBadListener)
	}
	adverts, advNames, err := parseEndpointList("advertised listeners", advertised)
	if err != nil {
		return nil, err
	}
	for _, name := range advNames {
		if _, ok := binds[name]; !ok {
			return nil, fmt.Errorf("%w: advertised listener %s is not a listener", ErrBadListener, name)
		}
	}
	out := make([]ListenerConfig, 0, len(names))
	for _, name := range names {
		proto, ok := protocols[name]
		if !ok {
			return nil, fmt.Errorf("%w: listener %s has no security protocol (name it as a protocol or map it)", ErrBadListener, name)
		}
		out = append(out, ListenerConfig{Name: name, Addr: binds[name], Advertise: adverts[name], Security: proto})
	}
	return out, nil
}

// parseProtocolMap parses "NAME:PROTOCOL,..." over the default map in
// which every protocol name maps to itself.
func parseProtocolMap(s string) (map[string]SecurityProtocol, error) {
	m := map[string]SecurityProtocol{}
	for _, p := range []SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL} {
		m[string(p)] = p
	}
	for _, item := range splitNonEmpty(s) {
		name, proto, ok := strings.Cut(item, ":")
		name, p := strings.ToUpper(strings.TrimSpace(name)), SecurityProtocol(strings.ToUpper(strings.TrimSpace(proto)))
		if !ok || !listenerNameRE.MatchString(name) || !p.valid() {
			return nil, fmt.Errorf("%w: protocol map entry %q: want NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL", ErrBadListener, item)
		}
		m[name] = p
	}
	return m, nil
}

// parseEndpointList parses "NAME://host:port,..." into name -> host:port,
// with the names in order. Names are unique.
func parseEndpointList(what, s string) (map[string]string, []string, error) {
	out := map[string]string{}
	var names []string
	for _, item := range splitNonEmpty(s) {
		name, addr, ok := strings.Cut(item, "://")
		name = strings.ToUpper(strings.TrimSpace(name))
		if !ok || !listenerNameRE.MatchString(name) {
			return nil, nil, fmt.Errorf("%w: %s entry %q: want NAME://host:port", ErrBadListener, what, item)
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, nil, fmt.Errorf("%w: %s entry %q: want NAME://host:port", ErrBadListener, what, item)
		}
		if _, dup := out[name]; dup {
			return nil, nil, fmt.Errorf("%w: %s names %s twice", ErrBadListener, what, name)
		}
		out[name] = addr
		names = append(names, name)
	}
	if len(names) > maxListeners {
		return nil, nil, fmt.Errorf("%w: %d %s (max %d)", ErrBadListener, len(names), what, maxListeners)
	}
	return out, names, nil
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// listeners returns the configured listeners, or the single PLAINTEXT
// listener of Listen/Advertise when none is configured.
func (c Config) listeners() []ListenerConfig {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []ListenerConfig{{Name: string(Plaintext), Addr: c.Listen, Advertise: c.Advertise, Security: Plaintext}}
}

// interBrokerListener is the name of the listener peers connect to.
func (c Config) interBrokerListener() string {
	if c.InterBrokerListener != "" {
		return c.InterBrokerListener
	}
	return c.listeners()[0].Name
}

// validateListeners checks names, addresses, TLS and mechanisms.
func (c Config) validateListeners() error {
	seen := map[string]bool{}
	ls := c.listeners()
	if len(ls) > maxListeners {
		return fmt.Errorf("%w: %d listeners (max %d)", ErrInvalidConfig, len(ls), maxListeners)
	}
	for _, l := range ls {
		if err := l.validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if seen[l.Name] {
			return fmt.Errorf("%w: listener %s twice", ErrInvalidConfig, l.Name)
		}
		seen[l.Name] = true
	}
	if !seen[c.interBrokerListener()] {
		return fmt.Errorf("%w: inter-broker listener %s is not a listener", ErrInvalidConfig, c.InterBrokerListener)
	}
	if s := c.InterBrokerSASL; s.Mechanism != "" && !auth.KnownMechanism(s.Mechanism) {
		return fmt.Errorf("%w: inter-broker SASL mechanism %q", ErrInvalidConfig, s.Mechanism)
	}
	return nil
}

func (l ListenerConfig) validate() error {
	switch {
	case !listenerNameRE.MatchString(l.Name):
		return fmt.Errorf("%w: name %q", ErrBadListener, l.Name)
	case !l.Security.valid():
		return fmt.Errorf("%w: %s: security protocol %q", ErrBadListener, l.Name, l.Security)
	case l.Security.usesTLS() && (l.TLS == nil || (len(l.TLS.Certificates) == 0 && l.TLS.GetCertificate == nil && l.TLS.GetConfigForClient == nil)):
		return fmt.Errorf("%w: %s (%s) needs a TLS certificate", ErrBadListener, l.Name, l.Security)
	}
	if _, _, err := parseHostPort(l.Addr); err != nil {
		return fmt.Errorf("%w: %s address %q: %v", ErrBadListener, l.Name, l.Addr, err)
	}
	if l.Advertise != "" {
		if host, port, err := parseHostPort(l.Advertise); err != nil || host == "" || port == 0 {
			return fmt.Errorf("%w: %s advertised address %q: want a concrete host:port", ErrBadListener, l.Name, l.Advertise)
		}
	}
	for _, m := range l.SASLMechanisms {
		if !auth.KnownMechanism(m) {
			return fmt.Errorf("%w: %s: SASL mechanism %q", ErrBadListener, l.Name, m)
		}
	}
	return nil
}

// listener is one bound named listener. Set by Start, read-only afterwards.
type listener struct {
	cfg ListenerConfig
	ln  net.Listener
	// endpoint is the advertised host:port.
	endpoint string
}

// openListeners binds every configured listener; on error it closes the
// ones already bound.
func (b *Broker) openListeners() ([]*listener, error) {
	var out []*listener
	for _, cfg := range b.cfg.listeners() {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err == nil {
			var endpoint string
			endpoint, err = advertisedEndpoint(cfg.Advertise, ln.Addr())
			out = append(out, &listener{cfg: cfg, ln: ln, endpoint: endpoint})
		}
		if err != nil {
			closeListeners(out)
			return nil, fmt.Errorf("broker: listener %s: %w", cfg.Name, err)
		}
	}
	return out, nil
}

func closeListeners(ls []*listener) {
	for _, l := range ls {
		_ = l.ln.Close()
	}
}

// advertisedEndpoint is advertise, or the bound address with the host
// name when it is bound to every interface.
func advertisedEndpoint(advertise string, bound net.Addr) (string, error) {
	addr := advertise
	if addr == "" {
		addr = bound.String()
	}
	host, port, err := parseHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("advertise %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("host name: %w", err)
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// registrationInfo is this broker's registration: every listener's
// endpoint, the first one also as Host/Port.
func (b *Broker) registrationInfo() (metadata.BrokerInfo, error) {
	info := metadata.BrokerInfo{NodeID: b.cfg.NodeID, Rack: b.cfg.Rack, Endpoints: map[string]string{}}
	for i, l := range b.listeners {
		if i == 0 {
			host, port, err := parseHostPort(l.endpoint)
			if err != nil {
				return info, fmt.Errorf("broker: listener %s: %w", l.cfg.Name, err)
			}
			info.Host, info.Port = host, port
		}
		info.Endpoints[l.cfg.Name] = l.endpoint
	}
	return info, nil
}

// ListenerAddr is the bound address of the named listener (nil before
// Start or for an unknown name).
func (b *Broker) ListenerAddr(name string) net.Addr {
	for _, l := range b.listeners {
		if l.cfg.Name == name {
			return l.ln.Addr()
		}
	}
	return nil
}

// interBrokerBoundAddr is the bound address of this broker's inter-broker
// listener ("" before Start): how the broker reaches itself.
func (b *Broker) interBrokerBoundAddr() string {
	if a := b.ListenerAddr(b.cfg.interBrokerListener()); a != nil {
		return a.String()
	}
	return ""
}

// endpointOn is where info's broker listens on the named listener:
// its registered endpoint of that name, else Host/Port (brokers that
// registered without names serve one PLAINTEXT listener).
func endpointOn(info metadata.BrokerInfo, name string) string {
	if addr, ok := info.Endpoints[name]; ok {
		return addr
	}
	return net.JoinHostPort(info.Host, strconv.Itoa(int(info.Port)))
}
