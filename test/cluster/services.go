package cluster

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// Faults of the services the brokers depend on: etcd and MinIO are killed
// with SIGKILL and started again on the same data dir and port, so the
// brokers reconnect to the same server with the same data.

// KillEtcd SIGKILLs etcd and waits for the exit.
func (c *Cluster) KillEtcd() {
	c.t.Helper()
	if err := c.Etcd.Kill(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("cluster: etcd killed (SIGKILL)")
}

// RestartEtcd starts etcd again and waits until it is healthy.
func (c *Cluster) RestartEtcd() {
	c.t.Helper()
	if err := c.Etcd.Start(); err != nil {
		c.t.Fatalf("restart etcd: %v", err)
	}
	c.t.Logf("cluster: etcd restarted")
}

// KillMinIO SIGKILLs MinIO (Config.MinIO) and holds its port until
// RestartMinIO: its port was chosen by the OS from the ephemeral range,
// where a client connection made during the outage could take it as its
// local port and make the restart fail with "address already in use".
func (c *Cluster) KillMinIO() {
	c.t.Helper()
	if c.MinIO == nil {
		c.t.Fatal("KillMinIO: the cluster has no MinIO (Config.MinIO)")
	}
	c.MinIO.Stop()
	hold, err := holdPort(c.MinIO.Addr)
	if err != nil {
		c.t.Fatalf("hold MinIO's port %s: %v", c.MinIO.Addr, err)
	}
	c.minioPort = hold
	c.t.Logf("cluster: MinIO killed (SIGKILL)")
}

// RestartMinIO starts MinIO again on the same port and data and waits until
// it is ready.
func (c *Cluster) RestartMinIO() {
	c.t.Helper()
	c.MinIO.Start() // binds beside the hold: both sockets have SO_REUSEADDR and only MinIO's listens
	if c.minioPort != nil {
		c.minioPort.release()
		c.minioPort = nil
	}
	c.t.Logf("cluster: MinIO restarted")
}

// portHold keeps a loopback TCP port bound without listening: connections
// to it are refused, as to a dead server, and the kernel picks it as no
// connection's local port. A server started with SO_REUSEADDR (Go's
// listeners, MinIO) can still bind and listen on it.
type portHold struct{ fd int }

// holdPort binds an IPv4 host:port (SO_REUSEADDR, no listen).
func holdPort(addr string) (*portHold, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	ip := net.ParseIP(host).To4()
	if err != nil || ip == nil {
		return nil, fmt.Errorf("hold %s: want an IPv4 host:port", addr)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], ip)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &portHold{fd: fd}, nil
}

func (h *portHold) release() { _ = syscall.Close(h.fd) }
