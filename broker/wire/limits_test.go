package wire

import "testing"

func TestConnLimiter(t *testing.T) {
	l := NewConnLimiter(ConnLimits{MaxConnections: 2, MaxConnectionsPerIP: 1})
	if !l.Admit("10.0.0.1", false) {
		t.Fatal("first connection refused")
	}
	if l.Admit("10.0.0.1", false) {
		t.Fatal("second connection from one IP admitted")
	}
	if !l.Admit("10.0.0.2", false) {
		t.Fatal("connection from another IP refused")
	}
	if l.Admit("10.0.0.3", false) {
		t.Fatal("connection beyond max connections admitted")
	}
	if !l.Admit("10.0.0.4", true) {
		t.Fatal("exempt connection refused by the broker-wide limit")
	}
	if l.Admit("10.0.0.4", true) {
		t.Fatal("exempt connection escaped the per-IP limit")
	}
	want := ConnStats{Open: 3, RefusedTotal: 1, RefusedPerIP: 2}
	if got := l.Stats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	for _, host := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.4"} {
		l.Release(host)
	}
	if got := l.Stats(); got.Open != 0 || len(l.mu.perIP) != 0 {
		t.Fatalf("after release: %+v, per IP %v", got, l.mu.perIP)
	}
	if !NewConnLimiter(ConnLimits{}).Admit("h", false) {
		t.Fatal("zero limits refused a connection")
	}
}
