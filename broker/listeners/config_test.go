package listeners

import (
	"errors"
	"testing"
)

func TestParseListeners(t *testing.T) {
	tests := []struct {
		name                     string
		listeners, adv, protoMap string
		want                     []Config
		wantErr                  bool
	}{
		{name: "one plaintext", listeners: "PLAINTEXT://127.0.0.1:9092",
			want: []Config{{Name: "PLAINTEXT", Addr: "127.0.0.1:9092", Security: Plaintext}}},
		{name: "named with map and advertised",
			listeners: "external://:9093, INTERNAL://10.0.0.1:9094",
			adv:       "EXTERNAL://kafka.example:9093",
			protoMap:  "EXTERNAL:SASL_SSL,internal:ssl",
			want: []Config{
				{Name: "EXTERNAL", Addr: ":9093", Advertise: "kafka.example:9093", Security: SASLSSL},
				{Name: "INTERNAL", Addr: "10.0.0.1:9094", Security: SSL},
			}},
		{name: "protocol names map to themselves", listeners: "SASL_PLAINTEXT://:1,SSL://:2",
			want: []Config{{Name: "SASL_PLAINTEXT", Addr: ":1", Security: SASLPlaintext}, {Name: "SSL", Addr: ":2", Security: SSL}}},
		{name: "unmapped name", listeners: "CLIENT://:9092", wantErr: true},
		{name: "duplicate name", listeners: "PLAINTEXT://:1,PLAINTEXT://:2", wantErr: true},
		{name: "no port", listeners: "PLAINTEXT://host", wantErr: true},
		{name: "no scheme", listeners: "127.0.0.1:9092", wantErr: true},
		{name: "empty", listeners: " , ", wantErr: true},
		{name: "advertised of no listener", listeners: "PLAINTEXT://:1", adv: "SSL://h:2", wantErr: true},
		{name: "bad protocol", listeners: "A://:1", protoMap: "A:TLS", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.listeners, tt.adv, tt.protoMap)
			if tt.wantErr {
				if !errors.Is(err, ErrBadListener) {
					t.Fatalf("got %+v, %v; want ErrBadListener", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Name != w.Name || g.Addr != w.Addr || g.Advertise != w.Advertise || g.Security != w.Security {
					t.Errorf("listener %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
