package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/listeners"
)

// rewriteEndpoints gives resp the endpoints of the listener the request
// arrived on (listeners.RewriteEndpoints). Nothing to do on the first
// listener, whose endpoints the handlers already used.
func (b *Broker) rewriteEndpoints(listenerName string, resp kmsg.Response) {
	if len(b.listeners) < 2 || listenerName == b.listeners[0].Config.Name {
		return
	}
	listeners.RewriteEndpoints(resp, listenerName, b.liveBrks.all)
}
