package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// Bounds of the harness's own waits.
const (
	readyTimeout = 60 * time.Second // broker start to /readyz
	exitTimeout  = 15 * time.Second // a signalled process to exit
	logTailBytes = 6000             // per broker, printed when a test fails
)

// Config describes a cluster. Zero values take the defaults.
type Config struct {
	// Brokers started by Start, node ids 1..Brokers. Default 3.
	Brokers int
	// Spare reserves node ids Brokers+1..Brokers+Spare for AddBroker; their
	// addresses and proxies exist from the start. Default 0.
	Spare int
	// MinIO starts a MinIO server and makes its bucket the object store;
	// otherwise a file:// store shared by the brokers is used.
	MinIO bool
	// LeaseTTL is --lease-ttl. Default 3s.
	LeaseTTL time.Duration
	// ReplicaLagTimeMax is --replica-lag-time-max. Default 3s.
	ReplicaLagTimeMax time.Duration
	// LogLevel is --log-level. Default debug.
	LogLevel string
	// RackPerBroker gives broker N --rack rackN (a zone per broker).
	RackPerBroker bool
	// ExtraArgs are appended to every broker's command line.
	ExtraArgs []string
}

func (c *Config) defaults() {
	if c.Brokers == 0 {
		c.Brokers = 3
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 3 * time.Second
	}
	if c.ReplicaLagTimeMax == 0 {
		c.ReplicaLagTimeMax = 3 * time.Second
	}
	if c.LogLevel == "" {
		c.LogLevel = "debug"
	}
}

// Validate rejects impossible configurations.
func (c *Config) Validate() error {
	if c.Brokers < 1 || c.Spare < 0 || c.Brokers+c.Spare > 16 {
		return fmt.Errorf("cluster: %d brokers and %d spares: want 1..16 in all", c.Brokers, c.Spare)
	}
	return nil
}

// Cluster is a running set of processes. Only the test goroutine calls its
// fault methods; clients and metadata queries may run concurrently.
type Cluster struct {
	t    testing.TB
	cfg  Config
	bin  string
	dir  string
	Etcd *EtcdServer
	// MinIO is nil unless Config.MinIO.
	MinIO       *tiertest.S3Server
	ObjectStore string    // the --object-store URL every broker gets
	minioPort   *portHold // MinIO's port while it is killed (KillMinIO)

	brokers []*Broker           // every slot, index = node id - 1
	links   map[[2]int32]*Proxy // (from, to) -> proxy used by from to reach to
	meta    metaClients         // per-broker clients for metadata questions
}

// Start starts etcd, MinIO if asked, and cfg.Brokers brokers, waiting until
// each is ready. Cleanup kills everything.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, cfg: cfg, bin: testkit.StrataBinary(t), dir: t.TempDir(), links: map[[2]int32]*Proxy{}}
	c.Etcd = startEtcd(t, filepath.Join(c.dir, "etcd"))
	if cfg.MinIO {
		c.MinIO = tiertest.StartMinIO(t)
		c.ObjectStore = c.MinIO.URL("cluster")
	} else {
		c.ObjectStore = "file://" + filepath.Join(c.dir, "bucket")
	}
	t.Cleanup(c.cleanup)
	c.makeSlots()
	for _, b := range c.brokers[:cfg.Brokers] {
		b.start()
	}
	return c
}

// makeSlots chooses every broker's addresses and creates all proxies.
func (c *Cluster) makeSlots() {
	n := c.cfg.Brokers + c.cfg.Spare
	etcdTarget := strings.TrimPrefix(c.Etcd.Endpoints[0], "http://")
	for i := 1; i <= n; i++ {
		id := int32(i)
		dir := filepath.Join(c.dir, fmt.Sprintf("broker-%d", id))
		b := &Broker{c: c, ID: id, Addr: testkit.FreeAddr(c.t), HTTPAddr: testkit.FreeAddr(c.t),
			DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "broker.log")}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			c.t.Fatal(err)
		}
		b.EtcdProxy = c.newProxy(fmt.Sprintf("etcd<-%d", id), etcdTarget)
		c.brokers = append(c.brokers, b)
	}
	for _, from := range c.brokers {
		for _, to := range c.brokers {
			if from != to {
				c.links[[2]int32{from.ID, to.ID}] = c.newProxy(fmt.Sprintf("%d->%d", from.ID, to.ID), to.Addr)
			}
		}
	}
}

func (c *Cluster) newProxy(name, target string) *Proxy {
	p, err := NewProxy(name, target)
	if err != nil {
		c.t.Fatalf("proxy %s: %v", name, err)
	}
	return p
}

// args is broker b's command line; the same at every (re)start.
func (c *Cluster) args(b *Broker) []string {
	var peers []string
	for _, other := range c.brokers {
		if other != b {
			peers = append(peers, fmt.Sprintf("%d=%s", other.ID, c.links[[2]int32{b.ID, other.ID}].Addr()))
		}
	}
	args := []string{"serve",
		"--node-id", fmt.Sprint(b.ID),
		"--listen", b.Addr, "--advertise", b.Addr,
		"--http", b.HTTPAddr,
		"--data-dir", b.DataDir,
		"--etcd", b.EtcdProxy.Addr(),
		"--cluster", "cluster",
		"--object-store", c.ObjectStore,
		"--lease-ttl", c.cfg.LeaseTTL.String(),
		"--replica-lag-time-max", c.cfg.ReplicaLagTimeMax.String(),
		"--durability", "replication",
		"--offsets-topic-replication-factor", "3",
		"--log-level", c.cfg.LogLevel,
	}
	if len(peers) > 0 {
		args = append(args, "--peer-address", strings.Join(peers, ","))
	}
	if c.cfg.RackPerBroker {
		args = append(args, "--rack", fmt.Sprintf("rack%d", b.ID))
	}
	return append(args, c.cfg.ExtraArgs...)
}

// Broker returns the slot of node id (started or not).
func (c *Cluster) Broker(id int32) *Broker {
	c.t.Helper()
	if id < 1 || int(id) > len(c.brokers) {
		c.t.Fatalf("no broker %d", id)
	}
	return c.brokers[id-1]
}

// Brokers returns every broker that was started (running or not).
func (c *Cluster) Brokers() []*Broker {
	var out []*Broker
	for _, b := range c.brokers {
		if b.Started() {
			out = append(out, b)
		}
	}
	return out
}

// Up returns the ids of brokers running, not SIGSTOPped and not cut.
func (c *Cluster) Up() []int32 {
	var ids []int32
	for _, b := range c.brokers {
		if b.Running() && !b.Paused() && !b.IsCut() {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// AddBroker starts the next spare slot and returns it.
func (c *Cluster) AddBroker() *Broker {
	c.t.Helper()
	for _, b := range c.brokers {
		if !b.Started() {
			b.start()
			return b
		}
	}
	c.t.Fatalf("no spare broker slot left (Config.Spare = %d)", c.cfg.Spare)
	return nil
}

func (c *Cluster) cleanup() {
	c.closeMetaClients()
	for _, b := range c.brokers {
		b.kill()
	}
	for _, p := range c.links {
		p.Close()
	}
	for _, b := range c.brokers {
		b.EtcdProxy.Close()
	}
	if c.minioPort != nil {
		c.minioPort.release()
	}
	if c.t.Failed() {
		c.dumpLogs()
	}
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// dumpLogs prints each started broker's log tail and keeps full copies.
func (c *Cluster) dumpLogs() {
	keep := os.Getenv("STRATA_TEST_LOG_DIR")
	if keep == "" {
		keep = filepath.Join(os.TempDir(), "strata-cluster-logs")
	}
	keep = filepath.Join(keep, unsafeChars.ReplaceAllString(c.t.Name(), "_"))
	_ = os.MkdirAll(keep, 0o755)
	ids := []int{}
	for _, b := range c.Brokers() {
		ids = append(ids, int(b.ID))
	}
	sort.Ints(ids)
	for _, id := range ids {
		b := c.brokers[id-1]
		data, _ := os.ReadFile(b.LogPath)
		_ = os.WriteFile(filepath.Join(keep, fmt.Sprintf("broker-%d.log", id)), data, 0o644)
		if len(data) > logTailBytes {
			data = data[len(data)-logTailBytes:]
		}
		c.t.Logf("broker %d log tail (full log in %s):\n%s", id, keep, data)
	}
	if data, err := os.ReadFile(c.Etcd.logPath); err == nil {
		_ = os.WriteFile(filepath.Join(keep, "etcd.log"), data, 0o644)
	}
}
