// Package listeners holds a broker's named listeners, configured as
// Kafka's listeners, advertised.listeners and
// listener.security.protocol.map:
//
//	listeners:      NAME://host:port,...      (empty host: every interface; port 0: any free port)
//	advertised:     NAME://host:port,...      (default: the listener's own address, the bound port)
//	protocol map:   NAME:PROTOCOL,...         (default: a name that is a protocol maps to itself)
//
// Names are upper case ([A-Z0-9_-], 1..64 characters) and unique; a broker
// has at most MaxListeners of them (its registration carries one endpoint
// each). Each listener is registered in metadata.BrokerInfo.Endpoints
// under its name; BrokerInfo.Host/Port is the first listener's endpoint.
// Brokers that registered without names serve one PLAINTEXT listener at
// Host/Port (metadata.BrokerInfo.Endpoint).
//
// # Endpoints in answers
//
// Handlers name brokers with the Host/Port of their registration, the
// endpoint of each broker's first listener. A client connected on another
// listener must get that listener's endpoints (Kafka answers with the
// endpoints of the listener the request arrived on), so the connection
// rewrites every broker endpoint of a response (RewriteEndpoints) before
// encoding it. Keeping this at the protocol edge leaves the handlers
// unaware of listeners. A broker without an endpoint on the listener keeps
// its first listener's.
//
// # Binding
//
// Open binds a broker's listeners in order (all or none) and resolves each
// one's advertised endpoint; Register turns them into the broker's
// registration. Accepting and serving connections are the broker's.
package listeners
