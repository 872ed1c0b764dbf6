package peer

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

func TestDialerAddressPrefersOverridesThenTheListener(t *testing.T) {
	d := Dialer{Overrides: map[int32]string{3: "proxy:3"}, Listener: "INTERNAL",
		Brokers: func() []metadata.BrokerInfo {
			return []metadata.BrokerInfo{
				{NodeID: 2, Host: "c2", Port: 2, Endpoints: map[string]string{"CLIENT": "c2:2", "INTERNAL": "i2:22"}},
				{NodeID: 3, Host: "c3", Port: 3, Endpoints: map[string]string{"INTERNAL": "i3:33"}},
				{NodeID: 4, Host: "old4", Port: 4},
			}
		}}
	for node, want := range map[int32]string{2: "i2:22", 3: "proxy:3", 4: "old4:4", 5: ""} {
		if got := d.Address(node); got != want {
			t.Errorf("peer %d at %q, want %q", node, got, want)
		}
	}
}

func TestSecurityOptions(t *testing.T) {
	for _, tc := range []struct {
		s       Security
		opts    int
		unknown bool
	}{
		{Security{}, 0, false},
		{Security{TLS: true}, 1, false},
		{Security{SASL: &SASL{}}, 1, false},
		{Security{TLS: true, SASL: &SASL{Mechanism: auth.MechPlain}}, 2, false},
		{Security{SASL: &SASL{Mechanism: auth.MechScramSHA256}}, 1, false},
		{Security{SASL: &SASL{Mechanism: "GSSAPI"}}, 0, true},
	} {
		opts, err := tc.s.opts()
		if errors.Is(err, ErrUnknownMechanism) != tc.unknown || (!tc.unknown && err != nil) || len(opts) != tc.opts {
			t.Errorf("%+v: %d options, err %v", tc.s, len(opts), err)
		}
	}
}

func TestSASLStringHidesThePassword(t *testing.T) {
	s := SASL{Mechanism: auth.MechPlain, Username: "broker", Password: "s3cret"}
	if got := s.String(); got != "{PLAIN broker ***}" {
		t.Fatalf("String() = %q", got)
	}
}
