package broker

import (
	"context"

	"github.com/strata-log/strata/broker/wire"
)

// versions is the served version range of key; ok false for an unknown key.
func (t apiTable) versions(key int16) (minVersion, maxVersion int16, ok bool) {
	e, ok := t[key]
	return e.spec.minVersion, e.spec.maxVersion, ok
}

// newConnServer prepares the server that runs the client connections
// (wire.Server) over the API table, the connection limits and the
// queued-bytes budget. REQUIRES: b.apis, b.connLimits and b.queued are set.
func newConnServer(b *Broker) (*wire.Server, error) {
	return wire.NewServer(wire.ServerConfig{
		Log:                 b.log,
		MaxInFlightRequests: b.cfg.MaxInFlightRequests,
		Versions:            b.apis.versions,
		Budget:              b.queued,
		Limiter:             b.connLimits,
	})
}

// acceptLoop accepts connections of one listener until it closes.
func (b *Broker) acceptLoop(l *listener) {
	defer b.loops.Done()
	spec := &wire.Listener{
		Name:                     l.Config.Name,
		ExemptFromMaxConnections: b.exemptFromMaxConnections(l.Config.Name),
		NewSession: func(ctx context.Context, info wire.ConnInfo) wire.Session {
			return newConn(ctx, b, l.Config, info)
		},
	}
	if l.Config.Security.UsesTLS() {
		spec.TLS = l.Config.TLS
	}
	b.conns.Accept(l.Listener, spec)
}
