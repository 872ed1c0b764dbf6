package cluster

import (
	"os"
	"syscall"
	"time"
)

// Kill SIGKILLs broker id and waits for the process to go.
func (c *Cluster) Kill(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	if err := b.signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill: %v", err)
	}
	if err := b.waitExit(exitTimeout); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("cluster: broker %d killed (SIGKILL)", id)
}

// Stop SIGSTOPs broker id: it keeps its sockets and answers nothing.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	if err := b.signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("stop: %v", err)
	}
	b.mu.Lock()
	b.mu.paused = true
	b.mu.Unlock()
	c.t.Logf("cluster: broker %d stopped (SIGSTOP)", id)
}

// Cont SIGCONTs a stopped broker.
func (c *Cluster) Cont(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	if err := b.signal(syscall.SIGCONT); err != nil {
		c.t.Fatalf("cont: %v", err)
	}
	b.mu.Lock()
	b.mu.paused = false
	b.mu.Unlock()
	c.t.Logf("cluster: broker %d continued (SIGCONT)", id)
}

// Shutdown sends SIGTERM (controlled shutdown) and waits for the exit; it
// returns the exit code.
func (c *Cluster) Shutdown(id int32, timeout time.Duration) int {
	c.t.Helper()
	b := c.Broker(id)
	if err := b.signal(syscall.SIGTERM); err != nil {
		c.t.Fatalf("shutdown: %v", err)
	}
	if err := b.waitExit(timeout); err != nil {
		b.kill()
		c.t.Fatalf("%v after SIGTERM", err)
	}
	return b.ExitCode()
}

// Restart starts broker id again with the same flags and data dir; a
// running process is SIGKILLed first.
func (c *Cluster) Restart(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	if b.Running() {
		c.Kill(id)
	}
	b.start()
	c.t.Logf("cluster: broker %d restarted", id)
}

// Wipe deletes broker id's data dir; the broker must be down.
func (c *Cluster) Wipe(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	if b.Running() {
		c.t.Fatalf("wipe: broker %d is running", id)
	}
	if err := os.RemoveAll(b.DataDir); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("cluster: broker %d data dir wiped", id)
}

// Cut blackholes every link of broker id: to and from its peers and to
// etcd. Clients still reach it directly.
func (c *Cluster) Cut(id int32) {
	c.t.Helper()
	c.setCut(id, true)
	c.t.Logf("cluster: broker %d cut from peers and etcd", id)
}

// Heal undoes Cut.
func (c *Cluster) Heal(id int32) {
	c.t.Helper()
	c.setCut(id, false)
	c.t.Logf("cluster: broker %d healed", id)
}

// setCut marks broker id and sets each of its links: a link stays cut while
// either end is cut.
func (c *Cluster) setCut(id int32, cut bool) {
	b := c.Broker(id)
	b.mu.Lock()
	b.mu.cut = cut
	b.mu.Unlock()
	setProxy(b.EtcdProxy, cut)
	for link, p := range c.links {
		if link[0] == id || link[1] == id {
			setProxy(p, c.Broker(link[0]).IsCut() || c.Broker(link[1]).IsCut())
		}
	}
}

func setProxy(p *Proxy, cut bool) {
	if cut {
		p.Cut()
	} else {
		p.Heal()
	}
}
