package peer

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/auth"
)

// ErrUnknownMechanism: Security names a SASL mechanism the client side
// does not speak.
var ErrUnknownMechanism = errors.New("peer: unknown SASL mechanism")

// Security is the client side of the inter-broker listener's protocol.
// The zero value is PLAINTEXT.
type Security struct {
	// TLS turns TLS on, with TLSConfig (nil: the system roots, no client
	// certificate, TLS 1.2 at least). TLSConfig is cloned, never changed.
	TLS       bool
	TLSConfig *tls.Config
	// SASL, when non-nil, authenticates every connection with it.
	SASL *SASL
}

// SASL is a broker's identity on a SASL inter-broker listener.
type SASL struct {
	// Mechanism is auth.MechPlain, auth.MechScramSHA256 or
	// auth.MechScramSHA512 (also when empty).
	Mechanism string
	Username  string
	// Password is a secret: never log it.
	Password string
}

// String hides the password (configurations are logged).
func (s SASL) String() string {
	return fmt.Sprintf("{%s %s ***}", s.Mechanism, s.Username)
}

// opts are franz-go's options for s.
func (s Security) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS {
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.TLSConfig != nil {
			tlsCfg = s.TLSConfig.Clone()
		}
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if s.SASL != nil {
		m, err := s.SASL.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// mechanism is franz-go's client side of s.
func (s SASL) mechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case auth.MechPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case auth.MechScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case auth.MechScramSHA512, "":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownMechanism, s.Mechanism)
}
