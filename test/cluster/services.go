package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// CutEtcd blackholes every broker's link to etcd (its etcd proxy): etcd
// keeps running, but open connections are reset and new ones held silent
// until HealEtcd, so a request in flight may be applied with its answer
// lost.
func (c *Cluster) CutEtcd() {
	c.t.Helper()
	for _, b := range c.brokers {
		b.EtcdProxy.Cut()
	}
	c.t.Logf("cluster: every broker cut from etcd")
}

// HealEtcd undoes CutEtcd; a broker cut with Cut stays cut.
func (c *Cluster) HealEtcd() {
	c.t.Helper()
	for _, b := range c.brokers {
		if !b.IsCut() {
			b.EtcdProxy.Heal()
		}
	}
	c.t.Logf("cluster: etcd links healed")
}

// CompactEtcd compacts etcd's history up to its current revision: a
// watcher that was disconnected before it (a broker behind CutEtcd or Cut)
// cannot resume and must load its state again.
func (c *Cluster) CompactEtcd() {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Etcd.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "compact-probe")
	if err == nil {
		_, err = cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	}
	if err != nil {
		c.t.Fatalf("compact etcd: %v", err)
	}
	c.t.Logf("cluster: etcd compacted up to revision %d", resp.Header.Revision)
}
