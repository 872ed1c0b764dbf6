package broker

// Named listeners: the broker's configuration surface for them (the
// format, validation, binding and endpoint rules are package listeners').

import (
	"fmt"
	"net"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/listeners"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication/peer"
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

// InterBrokerSASL is how this broker authenticates to peers on a SASL
// inter-broker listener. Password is a secret: never log it.
type InterBrokerSASL = peer.SASL

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
	if err := listeners.ValidateSet(c.listeners(), c.interBrokerListener()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if s := c.InterBrokerSASL; s.Mechanism != "" && !auth.KnownMechanism(s.Mechanism) {
		return fmt.Errorf("%w: inter-broker SASL mechanism %q", ErrInvalidConfig, s.Mechanism)
	}
	return nil
}

// listener is one bound named listener. Set by Start, read-only afterwards.
type listener = listeners.Bound

// registrationInfo is this broker's registration: every listener's
// endpoint, the first one also as Host/Port, and the HTTP address.
func (b *Broker) registrationInfo() (metadata.BrokerInfo, error) {
	info := metadata.BrokerInfo{NodeID: b.cfg.NodeID, Rack: b.cfg.Rack}
	if err := listeners.Register(&info, b.listeners); err != nil {
		return info, err
	}
	info.HTTP = advertisedHTTP(b.cfg.AdvertiseHTTP, info.Host)
	return info, nil
}

// advertisedHTTP is the HTTP address to register: advertise, with
// kafkaHost when advertise names no host. Config.Validate checked its form.
func advertisedHTTP(advertise, kafkaHost string) string {
	host, port, err := net.SplitHostPort(advertise)
	if err != nil {
		return ""
	}
	if host == "" {
		host = kafkaHost
	}
	return net.JoinHostPort(host, port)
}

// ListenerAddr is the bound address of the named listener (nil before
// Start or for an unknown name).
func (b *Broker) ListenerAddr(name string) net.Addr { return listeners.Addr(b.listeners, name) }

// interBrokerBoundAddr is the bound address of this broker's inter-broker
// listener ("" before Start): how the broker reaches itself.
func (b *Broker) interBrokerBoundAddr() string {
	if a := b.ListenerAddr(b.cfg.interBrokerListener()); a != nil {
		return a.String()
	}
	return ""
}
