package broker

import (
	"testing"

	"github.com/strata-log/strata/metadata"
)

// listeners and advertised.listeners name every named listener, not a
// PLAINTEXT listener the broker may not have.
func TestListenerConfigValues(t *testing.T) {
	c := &Config{Listeners: []ListenerConfig{{Name: "CLIENT", Addr: "0.0.0.0:9093", Security: SASLSSL},
		{Name: "INTERNAL", Addr: "10.0.0.1:9094", Security: SSL}}}
	a := metadata.BrokerInfo{Host: "b1.example", Port: 9093,
		Endpoints: map[string]string{"CLIENT": "b1.example:9093", "INTERNAL": "10.0.0.1:9094"}}
	if got, want := boundListeners(c, a), "CLIENT://0.0.0.0:9093,INTERNAL://10.0.0.1:9094"; got != want {
		t.Errorf("listeners = %q, want %q", got, want)
	}
	if got, want := advertisedListeners(c, a), "CLIENT://b1.example:9093,INTERNAL://10.0.0.1:9094"; got != want {
		t.Errorf("advertised.listeners = %q, want %q", got, want)
	}
	plain := &Config{Listen: "127.0.0.1:9092"}
	if got := boundListeners(plain, metadata.BrokerInfo{}); got != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("one plain listener: %q", got)
	}
}
