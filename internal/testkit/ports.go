package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// The range FreeAddr picks from: below Linux's ephemeral range
// (32768-60999), where the kernel never picks the local port of an outgoing
// connection, and above the ports of common local services.
const (
	fixedPortLow  = 20000
	fixedPortHigh = 32000
)

// handedOut is every port FreeAddr returned in this process: a test that
// stops a server keeps its port for the restart, and no other test may get
// that port meanwhile.
var handedOut struct {
	mu    sync.Mutex
	ports map[int]bool
}

// FreeAddr returns a loopback host:port that was free a moment ago and that
// no earlier call in this process returned. Another process may still take
// it before the caller binds it; callers that start a server on it retry.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// MustFreeAddr is FreeAddr for callers without a testing.TB (TestMain); it
// panics when no port is free.
func MustFreeAddr() string {
	addr, err := freeAddr()
	if err != nil {
		panic(err)
	}
	return addr
}

// FreePorts returns the first of n consecutive loopback ports, from the same
// range and with the same promise as FreeAddr, for programs that take a
// base port and count up from it.
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	for range 1000 {
		base := fixedPortLow + rand.IntN(fixedPortHigh-fixedPortLow-n)
		if claimPorts(base, n) {
			return base
		}
	}
	t.Fatalf("testkit: no %d free consecutive loopback ports in %d-%d", n, fixedPortLow, fixedPortHigh)
	return 0
}

// claimPorts claims base..base+n-1 if none was handed out before and each is
// free now; otherwise it claims none.
func claimPorts(base, n int) bool {
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for p := base; p < base+n; p++ {
		if handedOut.ports[p] || !portFree(p) {
			return false
		}
	}
	for p := base; p < base+n; p++ {
		handedOut.ports[p] = true
	}
	return true
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freeAddr() (string, error) {
	for range 1000 {
		port := fixedPortLow + rand.IntN(fixedPortHigh-fixedPortLow)
		if !claimPort(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("testkit: no free loopback port in %d-%d", fixedPortLow, fixedPortHigh)
}

// claimPort reports whether port was not handed out before in this process.
func claimPort(port int) bool {
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}
