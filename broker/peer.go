package broker

// Reaching other brokers: where they listen (PeerAddresses, else their
// registration) and the inter-broker listener's TLS and SASL, for the
// peer clients of the followers and of the transaction marker writer.

import (
	"crypto/tls"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/listeners"
	"github.com/strata-log/strata/replication/peer"
)

// dialPeerWithOverhead makes the client for the peer at addr (it connects
// lazily). overhead bounds the wait for each answer beyond the request's
// own timeout: peer.RequestOverhead, or more for requests the peer may
// hold longer (WriteTxnMarkers waits for the HW up to markerAckTimeout).
// nodeID names the client ("strata-replica-fetcher-<nodeID>").
func (b *Broker) dialPeerWithOverhead(nodeID int32, addr string, overhead time.Duration) (peer.Client, error) {
	security, err := b.peerSecurityOpts()
	if err != nil {
		return nil, err
	}
	return peer.Dial(peer.Config{
		Addr:     addr,
		ClientID: "strata-replica-fetcher-" + strconv.Itoa(int(nodeID)),
		Overhead: overhead,
		Security: security,
	})
}

// peerSecurityOpts are the TLS and SASL options of the inter-broker
// listener's protocol.
func (b *Broker) peerSecurityOpts() ([]kgo.Opt, error) {
	var l ListenerConfig
	for _, lc := range b.cfg.listeners() {
		if lc.Name == b.cfg.interBrokerListener() {
			l = lc
		}
	}
	var opts []kgo.Opt
	if l.Security.UsesTLS() {
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if b.cfg.InterBrokerTLS != nil {
			tlsCfg = b.cfg.InterBrokerTLS.Clone()
		}
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if l.Security.UsesSASL() {
		m, err := peerSASLMechanism(b.cfg.InterBrokerSASL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// peerSASLMechanism is franz-go's client side of cfg's mechanism.
func peerSASLMechanism(cfg InterBrokerSASL) (sasl.Mechanism, error) {
	switch cfg.Mechanism {
	case auth.MechPlain:
		return plain.Auth{User: cfg.Username, Pass: cfg.Password}.AsMechanism(), nil
	case auth.MechScramSHA256:
		return scram.Auth{User: cfg.Username, Pass: cfg.Password}.AsSha256Mechanism(), nil
	case auth.MechScramSHA512, "":
		return scram.Auth{User: cfg.Username, Pass: cfg.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: inter-broker SASL mechanism %q", ErrInvalidConfig, cfg.Mechanism)
}

// peerAddress is where node listens for replication: the PeerAddresses
// override, else its registered inter-broker listener endpoint; "" while
// unknown.
func (b *Broker) peerAddress(node int32) string {
	if addr := b.cfg.PeerAddresses[node]; addr != "" {
		return addr
	}
	for _, info := range b.liveBrks.all() {
		if info.NodeID == node {
			return listeners.EndpointOn(info, b.cfg.interBrokerListener())
		}
	}
	return ""
}
