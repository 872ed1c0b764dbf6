package listeners

import (
	"strings"
	"testing"

	"github.com/strata-log/strata/metadata"
)

func TestOpenRegisterClose(t *testing.T) {
	ls, err := Open([]Config{
		{Name: "CLIENT", Addr: "127.0.0.1:0", Advertise: "client.example:9092", Security: Plaintext},
		{Name: "INTERNAL", Addr: "127.0.0.1:0", Security: Plaintext},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer Close(ls)
	var info metadata.BrokerInfo
	if err := Register(&info, ls); err != nil {
		t.Fatal(err)
	}
	internal := Addr(ls, "INTERNAL")
	if info.Host != "client.example" || info.Port != 9092 || info.Endpoints["CLIENT"] != "client.example:9092" ||
		internal == nil || info.Endpoints["INTERNAL"] != internal.String() || Addr(ls, "NONE") != nil {
		t.Fatalf("registration %+v, internal %v", info, internal)
	}
}

func TestValidateSet(t *testing.T) {
	a := Config{Name: "A", Addr: "127.0.0.1:0", Security: Plaintext}
	b := Config{Name: "B", Addr: "127.0.0.1:0", Security: Plaintext}
	if err := ValidateSet([]Config{a, b}, "B"); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		ls          []Config
		interBroker string
		want        string
	}{
		"duplicate":            {[]Config{a, a}, "A", "listener A twice"},
		"unknown inter-broker": {[]Config{a, b}, "C", "inter-broker listener C is not a listener"},
		"too many":             {make([]Config, MaxListeners+1), "A", "listeners (max"},
	} {
		if err := ValidateSet(tc.ls, tc.interBroker); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
