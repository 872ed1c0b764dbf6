package listeners

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

// UsesTLS: the connection is a TLS server connection.
func (p SecurityProtocol) UsesTLS() bool { return p == SSL || p == SASLSSL }

// UsesSASL: the client must authenticate with SASL before any other request.
func (p SecurityProtocol) UsesSASL() bool { return p == SASLPlaintext || p == SASLSSL }

func (p SecurityProtocol) valid() bool {
	return p == Plaintext || p == SSL || p == SASLPlaintext || p == SASLSSL
}

// Config is one named listener.
type Config struct {
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
	// SCRAM-SHA-256, SCRAM-SHA-512). Default: auth.DefaultMechanisms.
	SASLMechanisms []string
}

// MaxListeners bounds the named listeners of one broker (the registration
// carries one endpoint each).
const MaxListeners = metadata.MaxBrokerEndpoints

var nameRE = regexp.MustCompile(`^[A-Z0-9_-]{1,64}$`)

// Parse parses Kafka's listeners, advertised.listeners and
// listener.security.protocol.map settings (formats in the package
// comment) into listener configs, in the order of listeners. TLS and
// mechanisms are left for the caller to fill in.
func Parse(listeners, advertised, protocolMap string) ([]Config, error) {
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
	out := make([]Config, 0, len(names))
	for _, name := range names {
		proto, ok := protocols[name]
		if !ok {
			return nil, fmt.Errorf("%w: listener %s has no security protocol (name it as a protocol or map it)", ErrBadListener, name)
		}
		out = append(out, Config{Name: name, Addr: binds[name], Advertise: adverts[name], Security: proto})
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
		if !ok || !nameRE.MatchString(name) || !p.valid() {
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
		if !ok || !nameRE.MatchString(name) {
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
	if len(names) > MaxListeners {
		return nil, nil, fmt.Errorf("%w: %d %s (max %d)", ErrBadListener, len(names), what, MaxListeners)
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

// Validate checks the name, protocol, TLS certificate, addresses and
// mechanisms of one listener.
func (l Config) Validate() error {
	switch {
	case !nameRE.MatchString(l.Name):
		return fmt.Errorf("%w: name %q", ErrBadListener, l.Name)
	case !l.Security.valid():
		return fmt.Errorf("%w: %s: security protocol %q", ErrBadListener, l.Name, l.Security)
	case l.Security.UsesTLS() && (l.TLS == nil || (len(l.TLS.Certificates) == 0 && l.TLS.GetCertificate == nil && l.TLS.GetConfigForClient == nil)):
		return fmt.Errorf("%w: %s (%s) needs a TLS certificate", ErrBadListener, l.Name, l.Security)
	}
	if _, _, err := SplitHostPort(l.Addr); err != nil {
		return fmt.Errorf("%w: %s address %q: %v", ErrBadListener, l.Name, l.Addr, err)
	}
	if l.Advertise != "" {
		if host, port, err := SplitHostPort(l.Advertise); err != nil || host == "" || port == 0 {
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

// SplitHostPort splits host:port, the port a 16-bit number.
func SplitHostPort(s string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", portStr, err)
	}
	return host, int32(port), nil
}

// AdvertisedEndpoint is advertise, or the bound address with the host
// name when it is bound to every interface.
func AdvertisedEndpoint(advertise string, bound net.Addr) (string, error) {
	addr := advertise
	if addr == "" {
		addr = bound.String()
	}
	host, port, err := SplitHostPort(addr)
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
