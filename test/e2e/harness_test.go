package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-log/strata/internal/testkit"
)

// Bounds for every wait in the harness.
const (
	readyTimeout = 90 * time.Second // broker start, including embedded etcd
	stopTimeout  = 60 * time.Second // SIGTERM to exit
	etcdTimeout  = 30 * time.Second
)

// Process-wide state set once by TestMain and read-only afterwards.
var (
	strataBin    string // path of the binary under test
	etcdMode     string // "embedded" or "external"
	etcdEndpoint string // host:port of the shared external etcd, if running
	etcdErr      error  // why the external etcd is unavailable
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "strata-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	defer testkit.RemoveBuilt()
	if strataBin, err = testkit.BuildStrata(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building strata:", err)
		return 1
	}
	etcdMode = "embedded"
	if os.Getenv("STRATA_TEST_ETCD") == "external" {
		etcdMode = "external"
		// A port chosen free may be taken before etcd binds it: retry.
		for attempt := 0; attempt < 3; attempt++ {
			stop, err := startExternalEtcd(filepath.Join(tmp, fmt.Sprintf("etcd-%d", attempt)))
			if etcdErr = err; err == nil {
				defer stop()
				break
			}
		}
	}
	return m.Run()
}

// startExternalEtcd runs the etcd binary on free loopback ports until stop,
// as the shared etcd of external mode.
func startExternalEtcd(dir string) (stop func(), err error) {
	endpoint, stop, err := runEtcd(dir)
	if err != nil {
		return nil, err
	}
	etcdEndpoint = endpoint
	return stop, nil
}

// runEtcd runs the etcd binary on free loopback ports until stop and
// returns its client host:port.
func runEtcd(dir string) (endpoint string, stop func(), err error) {
	path, err := exec.LookPath("etcd")
	if err != nil {
		return "", nil, fmt.Errorf("etcd binary not found: %w", err)
	}
	clientURL := "http://" + testkit.MustFreeAddr()
	peerURL := "http://" + testkit.MustFreeAddr()
	proc, err := testkit.StartProcess(testkit.ProcessConfig{Bin: path, LogPath: dir + ".log", Args: []string{
		"--name", "e2e", "--data-dir", dir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e=" + peerURL, "--initial-cluster-state", "new"}})
	if err != nil {
		return "", nil, err
	}
	stop = func() { proc.Kill(stopTimeout) }
	if err := testkit.WaitHTTP200(clientURL+"/health", etcdTimeout, nil); err != nil {
		stop()
		b, _ := os.ReadFile(dir + ".log")
		return "", nil, fmt.Errorf("etcd not healthy: %w\n%s", err, testkit.Tail(string(b), 4000))
	}
	return strings.TrimPrefix(clientURL, "http://"), stop, nil
}

// clusterEtcd is an etcd for a multi-broker test that outlives any one
// broker: the shared one in external mode, else a private etcd process
// stopped at cleanup.
func clusterEtcd(t *testing.T) string {
	t.Helper()
	if etcdMode == "external" {
		return etcdEndpoint
	}
	testkit.NeedBinary(t, "etcd")
	var endpoint string
	var stop func()
	var err error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before etcd binds it
		if endpoint, stop, err = runEtcd(filepath.Join(t.TempDir(), "etcd")); err == nil {
			t.Cleanup(stop)
			return endpoint
		}
	}
	t.Fatalf("etcd: %v", err)
	return ""
}

// Broker is one strata serve process. Its ports, data dir and cluster name
// stay fixed across restarts. Only the test goroutine drives it.
type Broker struct {
	t         testing.TB
	NodeID    int
	Addr      string // Kafka listener host:port
	HTTPAddr  string
	DataDir   string
	Cluster   string
	ExtraArgs []string
	UseEnv    bool // configure through STRATA_<NAME> variables, not flags
	// Listeners, when set, replace --listen/--advertise with named
	// listeners (--listeners etc.); Addr is the first one's.
	Listeners []Listener
	// Etcd is an external etcd endpoint for this broker alone (another
	// broker's embedded etcd, say); "" follows etcdMode.
	Etcd    string
	logPath string

	proc *testkit.Process // the current or last run; nil before the first
}

// brokerOpt adjusts a Broker before its first start.
type brokerOpt func(*Broker)

// withArgs appends flags to every start of the broker.
func withArgs(args ...string) brokerOpt {
	return func(b *Broker) { b.ExtraArgs = append(b.ExtraArgs, args...) }
}

// Listener is one named listener of a broker.
type Listener struct {
	Name     string // listener name, e.g. "CLIENT"
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	Addr     string // host:port; empty: a free loopback port
}

// withListeners serves the named listeners instead of one PLAINTEXT
// --listen address. Addr becomes the first listener's address.
func withListeners(ls ...Listener) brokerOpt {
	return func(b *Broker) {
		b.Listeners = nil
		for _, l := range ls {
			if l.Addr == "" {
				l.Addr = testkit.MustFreeAddr()
			}
			b.Listeners = append(b.Listeners, l)
		}
		b.Addr = b.Listeners[0].Addr
	}
}

// withEtcd keeps the broker's metadata in the etcd at endpoint (not an
// embedded one), e.g. to join another broker's cluster.
func withEtcd(endpoint string) brokerOpt {
	return func(b *Broker) { b.Etcd = endpoint }
}

// ListenerAddr is the address of the named listener ("" if none).
func (b *Broker) ListenerAddr(name string) string {
	for _, l := range b.Listeners {
		if l.Name == name {
			return l.Addr
		}
	}
	return ""
}

// withEnvConfig passes the broker's settings as STRATA_<NAME> variables.
func withEnvConfig(nodeID int) brokerOpt {
	return func(b *Broker) { b.UseEnv, b.NodeID = true, nodeID }
}

var clusterSeq struct {
	sync.Mutex
	n int
}

// StartBroker starts a broker for t and waits until it is ready. Cleanup
// kills it and shows its output if t failed.
func StartBroker(t testing.TB, opts ...brokerOpt) *Broker {
	t.Helper()
	b := newBroker(t, opts...)
	b.Start()
	return b
}

// newBroker sets up a broker for t without starting it.
func newBroker(t testing.TB, opts ...brokerOpt) *Broker {
	t.Helper()
	if etcdMode == "external" && etcdErr != nil {
		testkit.Missing(t, "external etcd unavailable: %v", etcdErr)
	}
	dir := t.TempDir()
	clusterSeq.Lock()
	clusterSeq.n++
	seq := clusterSeq.n
	clusterSeq.Unlock()
	b := &Broker{
		t:        t,
		NodeID:   1,
		Addr:     testkit.FreeAddr(t),
		HTTPAddr: testkit.FreeAddr(t),
		DataDir:  filepath.Join(dir, "data"),
		Cluster:  fmt.Sprintf("e2e-%s-%d-%d", sanitize(t.Name()), os.Getpid(), seq),
		logPath:  filepath.Join(dir, "broker.log"),
	}
	for _, o := range opts {
		o(b)
	}
	t.Cleanup(b.cleanup)
	return b
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

func sanitize(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// settings are the broker's configuration as (flag name, value) pairs.
func (b *Broker) settings() [][2]string {
	set := [][2]string{
		{"node-id", fmt.Sprint(b.NodeID)},
		{"data-dir", b.DataDir},
		{"cluster", b.Cluster},
		{"http", b.HTTPAddr},
	}
	set = append(set, b.listenerSettings()...)
	switch {
	case b.Etcd != "":
		set = append(set, [2]string{"etcd", b.Etcd})
	case etcdMode == "external":
		set = append(set, [2]string{"etcd", etcdEndpoint})
	}
	return set
}

// listenerSettings are --listen/--advertise, or the named listeners.
func (b *Broker) listenerSettings() [][2]string {
	if len(b.Listeners) == 0 {
		return [][2]string{{"listen", b.Addr}, {"advertise", b.Addr}}
	}
	var endpoints, protocols []string
	for _, l := range b.Listeners {
		endpoints = append(endpoints, l.Name+"://"+l.Addr)
		protocols = append(protocols, l.Name+":"+l.Protocol)
	}
	return [][2]string{
		{"listeners", strings.Join(endpoints, ",")},
		{"advertised-listeners", strings.Join(endpoints, ",")},
		{"listener-security-protocol-map", strings.Join(protocols, ",")},
	}
}

// args is the command line: the settings as flags, unless UseEnv passes
// them as STRATA_<NAME> variables instead.
func (b *Broker) args() []string {
	a := []string{"serve"}
	if !b.UseEnv {
		for _, kv := range b.settings() {
			a = append(a, "--"+kv[0], kv[1])
		}
	}
	return append(a, b.ExtraArgs...)
}

// env is the process environment: the test's, without STRATA_* variables
// (so only the harness configures the broker), plus the settings when UseEnv.
func (b *Broker) env() []string {
	env := testkit.EnvWithout("STRATA_")
	if b.UseEnv {
		for _, kv := range b.settings() {
			env = append(env, "STRATA_"+strings.ToUpper(strings.ReplaceAll(kv[0], "-", "_"))+"="+kv[1])
		}
	}
	return env
}

// Start launches the process (again) and waits for /readyz.
func (b *Broker) Start() {
	b.t.Helper()
	proc := b.launch()
	alive := func() error {
		if proc.HasExited() {
			return fmt.Errorf("broker exited during start: %v", proc.Err())
		}
		return nil
	}
	if err := testkit.WaitHTTP200("http://"+b.HTTPAddr+"/readyz", readyTimeout, alive); err != nil {
		b.t.Fatalf("broker not ready: %v\n%s", err, b.Log())
	}
	if err := b.waitLogLine("strata: serving kafka on", 10*time.Second); err != nil {
		b.t.Fatalf("%v\n%s", err, b.Log())
	}
	if etcdMode == "external" && b.Etcd == "" {
		b.checkUsesExternalEtcd()
	} else if _, err := os.Stat(filepath.Join(b.DataDir, "etcd")); err != nil && b.Etcd == "" {
		b.t.Fatalf("embedded mode, yet no etcd data under the data dir: %v", err)
	}
}

// launch starts the process.
func (b *Broker) launch() *testkit.Process {
	b.t.Helper()
	if !b.hasExited() {
		b.t.Fatalf("broker already running")
	}
	b.t.Logf("starting %s %s (env settings: %v)", strataBin, strings.Join(b.args(), " "), b.UseEnv)
	proc, err := testkit.StartProcess(testkit.ProcessConfig{Bin: strataBin, Args: b.args(), Env: b.env(), LogPath: b.logPath})
	if err != nil {
		b.t.Fatalf("start strata: %v", err)
	}
	b.proc = proc
	return proc
}

// startServing launches the process and waits until it serves Kafka,
// not until /readyz says ready (for brokers started with a check failing).
func (b *Broker) startServing() {
	b.t.Helper()
	b.launch()
	if err := b.waitLogLine("strata: serving kafka on", readyTimeout); err != nil {
		b.t.Fatalf("%v\n%s", err, b.Log())
	}
}

// checkUsesExternalEtcd proves the broker keeps its metadata in the shared
// etcd under /strata/<cluster>/ and runs no embedded one.
func (b *Broker) checkUsesExternalEtcd() {
	b.t.Helper()
	if _, err := os.Stat(filepath.Join(b.DataDir, "etcd")); err == nil {
		b.t.Fatalf("--etcd given, yet %s/etcd exists (embedded etcd started?)", b.DataDir)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.t.Fatalf("etcd client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "/strata/"+b.Cluster+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		b.t.Fatalf("etcd get: %v", err)
	}
	if resp.Count == 0 {
		b.t.Fatalf("external etcd holds no key under /strata/%s/ after the broker started", b.Cluster)
	}
}

func (b *Broker) waitLogLine(substr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(b.Log(), substr) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("broker never printed %q", substr)
}

// hasExited says the last run has exited (or there was none).
func (b *Broker) hasExited() bool { return b.proc == nil || b.proc.HasExited() }

// exitErr is the last run's exit error (nil while it runs or for exit 0).
func (b *Broker) exitErr() error {
	if b.proc == nil {
		return nil
	}
	return b.proc.Err()
}

// Log returns everything the broker printed so far (all runs).
func (b *Broker) Log() string {
	data, _ := os.ReadFile(b.logPath)
	return string(data)
}

// Stop sends SIGTERM and returns the exit error (nil for exit code 0); a
// broker still running after stopTimeout is killed.
func (b *Broker) Stop() error {
	b.t.Helper()
	return b.proc.Stop(stopTimeout)
}

// Kill sends SIGKILL and waits for the process to go.
func (b *Broker) Kill() {
	if b.proc != nil {
		b.proc.Kill(10 * time.Second)
	}
}

// Restart stops the broker with SIGTERM (requiring exit code 0) and starts it again.
func (b *Broker) Restart() {
	b.t.Helper()
	if err := b.Stop(); err != nil {
		b.t.Fatalf("SIGTERM: want exit 0, got %v\n%s", err, b.Log())
	}
	b.Start()
}

func (b *Broker) cleanup() {
	b.Kill()
	if b.t.Failed() {
		b.t.Logf("broker log (%s):\n%s", b.logPath, testkit.Tail(b.Log(), 20000))
	}
}

// PartitionDir is the broker's directory of one partition.
func (b *Broker) PartitionDir(topic string, partition int32) string {
	return filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// Client returns a franz-go client for the broker, closed at cleanup.
func (b *Broker) Client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.RetryTimeout(30 * time.Second),
		kgo.RequestTimeoutOverhead(10 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client on a fresh kgo client.
func (b *Broker) Admin() *kadm.Client {
	// kgo answers Metadata from a cache up to MetadataMinAge old (5s by
	// default); tests that look for a just-made change want the broker's view.
	return kadm.NewClient(b.Client(kgo.MetadataMinAge(50 * time.Millisecond)))
}

// testCtx is a context bounded by d and cancelled at cleanup.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic through kadm and fails t on any error.
func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}
