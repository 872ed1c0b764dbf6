package broker

// Reaching other brokers: the peer Dialer of the followers and of the
// transaction marker writer, configured from the inter-broker listener.

import "github.com/strata-log/strata/replication/peer"

// newPeerDialer reaches peers at their PeerAddresses override, else at
// their registered inter-broker listener, speaking that listener's
// protocol.
func newPeerDialer(b *Broker) peer.Dialer {
	d := peer.Dialer{Overrides: b.cfg.PeerAddresses, Listener: b.cfg.interBrokerListener(), Brokers: b.liveBrks.all}
	for _, l := range b.cfg.listeners() {
		if l.Name != d.Listener {
			continue
		}
		d.Security.TLS, d.Security.TLSConfig = l.Security.UsesTLS(), b.cfg.InterBrokerTLS
		if l.Security.UsesSASL() {
			sasl := b.cfg.InterBrokerSASL
			d.Security.SASL = &sasl
		}
	}
	return d
}
