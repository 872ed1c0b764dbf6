package broker

// Named listeners: the broker's configuration surface for them (the
// format, validation and endpoint rules are package listeners'), binding
// them at Start, and registering their endpoints.

import (
	"fmt"
	"net"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/listeners"
	"github.com/strata-log/strata/metadata"
)

// ListenerConfig is one named listener (listeners.Config).
type ListenerConfig = listeners.Config

// SecurityProtocol is a listener's Kafka security protocol.
type SecurityProtocol = listeners.SecurityProtocol

// The security protocols of Kafka.
const (
	Plaintext     = listeners.Plaintext
	SSL           = listeners.SSL
	SASLPlaintext = listeners.SASLPlaintext
	SASLSSL       = listeners.SASLSSL
)

// ErrBadListener is returned for listener specifications that cannot work.
var ErrBadListener = listeners.ErrBadListener

// ParseListeners parses Kafka's listeners, advertised.listeners and
// listener.security.protocol.map settings (listeners.Parse).
func ParseListeners(listenerList, advertised, protocolMap string) ([]ListenerConfig, error) {
	return listeners.Parse(listenerList, advertised, protocolMap)
}

// maxListeners bounds the named listeners of one broker.
const maxListeners = listeners.MaxListeners

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
		if err := l.Validate(); err != nil {
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

// listener is one bound named listener. Set by Start, read-only afterwards.
type listener struct {
	cfg ListenerConfig
	ln  net.Listener
	// endpoint is the advertised host:port.
	endpoint string
}

// openListeners binds every listener of cfgs; on error it closes the ones
// already bound.
func openListeners(cfgs []ListenerConfig) ([]*listener, error) {
	var out []*listener
	for _, cfg := range cfgs {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err == nil {
			var endpoint string
			endpoint, err = listeners.AdvertisedEndpoint(cfg.Advertise, ln.Addr())
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

// registrationInfo is this broker's registration: every listener's
// endpoint, the first one also as Host/Port.
func (b *Broker) registrationInfo() (metadata.BrokerInfo, error) {
	info := metadata.BrokerInfo{NodeID: b.cfg.NodeID, Rack: b.cfg.Rack, Endpoints: map[string]string{}}
	for i, l := range b.listeners {
		if i == 0 {
			host, port, err := listeners.SplitHostPort(l.endpoint)
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
