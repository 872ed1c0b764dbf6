package listeners

import (
	"fmt"
	"net"

	"github.com/strata-log/strata/metadata"
)

// Bound is one bound named listener. Made by Open, read-only afterwards.
type Bound struct {
	Config Config
	// Listener accepts the listener's connections; the broker's accept
	// loop owns it until Close.
	Listener net.Listener
	// Endpoint is the advertised host:port.
	Endpoint string
}

// Open binds every listener of cfgs, in order; on error it closes the ones
// already bound.
func Open(cfgs []Config) ([]*Bound, error) {
	var out []*Bound
	for _, cfg := range cfgs {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err == nil {
			var endpoint string
			endpoint, err = AdvertisedEndpoint(cfg.Advertise, ln.Addr())
			out = append(out, &Bound{Config: cfg, Listener: ln, Endpoint: endpoint})
		}
		if err != nil {
			Close(out)
			return nil, fmt.Errorf("broker: listener %s: %w", cfg.Name, err)
		}
	}
	return out, nil
}

// Close closes every listener of ls.
func Close(ls []*Bound) {
	for _, l := range ls {
		_ = l.Listener.Close()
	}
}

// Register fills info's endpoints: every listener's under its name, the
// first one also as Host/Port.
func Register(info *metadata.BrokerInfo, ls []*Bound) error {
	info.Endpoints = map[string]string{}
	for i, l := range ls {
		if i == 0 {
			host, port, err := SplitHostPort(l.Endpoint)
			if err != nil {
				return fmt.Errorf("broker: listener %s: %w", l.Config.Name, err)
			}
			info.Host, info.Port = host, port
		}
		info.Endpoints[l.Config.Name] = l.Endpoint
	}
	return nil
}

// Addr is the bound address of the named listener of ls (nil for an
// unknown name).
func Addr(ls []*Bound, name string) net.Addr {
	for _, l := range ls {
		if l.Config.Name == name {
			return l.Listener.Addr()
		}
	}
	return nil
}

// ValidateSet checks a broker's listeners as a whole: each one valid, at
// most MaxListeners, unique names, and interBroker among them.
func ValidateSet(ls []Config, interBroker string) error {
	if len(ls) > MaxListeners {
		return fmt.Errorf("%d listeners (max %d)", len(ls), MaxListeners)
	}
	seen := map[string]bool{}
	for _, l := range ls {
		if err := l.Validate(); err != nil {
			return err
		}
		if seen[l.Name] {
			return fmt.Errorf("listener %s twice", l.Name)
		}
		seen[l.Name] = true
	}
	if !seen[interBroker] {
		return fmt.Errorf("inter-broker listener %s is not a listener", interBroker)
	}
	return nil
}
