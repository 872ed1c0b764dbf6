package broker

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
)

// TestAPIRegistryMatchesGolden: the registry advertises exactly the keys,
// version ranges and handlers of testdata/api_versions.golden, the list
// the broker served before the API maps became one registry. A change to
// the supported APIs updates the golden file on purpose.
func TestAPIRegistryMatchesGolden(t *testing.T) {
	tab := newAPITable(nil)
	var got strings.Builder
	for _, k := range tab.apiKeys() {
		handler := runtime.FuncForPC(reflect.ValueOf(tab[k.ApiKey].spec.handle).Pointer()).Name()
		handler = handler[strings.LastIndex(handler, ".")+1:]
		fmt.Fprintf(&got, "%d %d %d %s\n", k.ApiKey, k.MinVersion, k.MaxVersion, handler)
	}
	want, err := os.ReadFile("testdata/api_versions.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("registry differs from testdata/api_versions.golden:\n%s", got.String())
	}
}

// TestAPIRegistryFacts: the per-API facts the connection and the quotas
// act on are those they used before the registry held them.
func TestAPIRegistryFacts(t *testing.T) {
	tab := newAPITable(nil)
	for key := range tab {
		wantPreAuth := key == wire.APIVersionsKey || key == wire.SASLHandshakeKey || key == wire.SASLAuthenticateKey
		if got := tab.preAuthAllowed(key); got != wantPreAuth {
			t.Errorf("key %d: preAuth %v, want %v", key, got, wantPreAuth)
		}
		wantWaits := key == 0 || key == 1 || key == 11 || key == 14
		if got := specOf(key).waitsInHandler; got != wantWaits {
			t.Errorf("key %d: waitsInHandler %v, want %v", key, got, wantWaits)
		}
	}
	if tab.preAuthAllowed(-1) || specOf(1000).waitsInHandler {
		t.Fatal("an unknown key has facts")
	}
}

// TestDecodeRoundTrip: every supported request at every supported version,
// encoded by kmsg with a client id, decodes to the same header and body.
func TestDecodeRoundTrip(t *testing.T) {
	tab := newAPITable(nil)
	for key, e := range tab {
		for v := e.spec.minVersion; v <= e.spec.maxVersion; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("client-1")).AppendRequest(nil, req, 77)
			hdr, req, err := wire.DecodeRequest(frame[4:], tab.versions)
			if err != nil {
				t.Fatalf("key %d v%d: %v", key, v, err)
			}
			if hdr.ClientID != "client-1" || hdr.CorrelationID != 77 || req.GetVersion() != v {
				t.Fatalf("key %d v%d: header %+v", key, v, hdr)
			}
		}
	}
}
