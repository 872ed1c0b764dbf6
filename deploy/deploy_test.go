package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// foreignFlags are the flags in deploy/ that belong to other programs
// (etcd, MinIO, apt-get, Docker, local-cluster.sh itself): every other
// `--flag` must be a flag of `strata serve`.
var foreignFlags = map[string]string{
	"name": "etcd", "listen-client-urls": "etcd", "advertise-client-urls": "etcd",
	"listen-peer-urls": "etcd", "initial-advertise-peer-urls": "etcd", "initial-cluster": "etcd",
	"quiet": "minio", "address": "minio",
	"no-install-recommends": "apt-get", "from": "Dockerfile COPY",
	"interval": "Dockerfile HEALTHCHECK", "timeout": "Dockerfile HEALTHCHECK",
	"start-period": "Dockerfile HEALTHCHECK", "retries": "Dockerfile HEALTHCHECK",
	"profile": "docker compose", "dir": "local-cluster.sh",
}

var (
	// flagRE matches a long flag as a word of its own (after a space, a
	// quote or a bracket, or at the start of a line).
	flagRE = regexp.MustCompile(`(?m)(?:^|[\s"'\[(])--([a-z][a-z0-9-]*)`)
	envRE  = regexp.MustCompile(`\bSTRATA_([A-Z0-9_]+)`)
	// helpRE matches a flag line of Go's flag.PrintDefaults.
	helpRE = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)
)

// usedFlags returns the strata flags text uses, as flag names: --x as x,
// STRATA_X_Y as x-y; foreign flags are left out. Values are where each was seen.
func usedFlags(text string) map[string]string {
	used := map[string]string{}
	for _, m := range flagRE.FindAllStringSubmatch(text, -1) {
		if _, foreign := foreignFlags[m[1]]; !foreign {
			used[m[1]] = "--" + m[1]
		}
	}
	for _, m := range envRE.FindAllStringSubmatch(text, -1) {
		used[strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))] = "STRATA_" + m[1]
	}
	return used
}

// serveFlags returns the flag names `strata serve --help` lists.
func serveFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("strata serve --help: %v\n%s", err, out)
	}
	known := map[string]bool{}
	for _, m := range helpRE.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	if !known["node-id"] || !known["object-store"] {
		t.Fatalf("could not parse flags from strata serve --help:\n%s", out)
	}
	return known
}

// TestMain removes the strata binary the tests built.
func TestMain(m *testing.M) { os.Exit(testkit.Main(m)) }

func TestUsedFlagsExtraction(t *testing.T) {
	got := usedFlags("strata serve --node-id 1 \\\n  --etcd=x \"--http\" --initial-cluster a=b\nSTRATA_DATA_DIR=/x x--not-a-flag\n")
	want := []string{"data-dir", "etcd", "http", "node-id"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Fatalf("usedFlags = %v, want %v", keys, want)
	}
}

// TestDeployFlagsExist checks every --flag and STRATA_* variable in the
// files under deploy/ (the Go sources aside) against `strata serve --help`.
func TestDeployFlagsExist(t *testing.T) {
	known := serveFlags(t, testkit.StrataBinary(t))
	var unknown []string
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for name, as := range usedFlags(string(b)) {
			seen[name] = true
			if !known[name] {
				unknown = append(unknown, fmt.Sprintf("%s: %s", path, as))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The files must really be scanned: these are used in all of them.
	for _, name := range []string{"node-id", "etcd", "object-store", "default-replication-factor", "data-dir", "advertise"} {
		if !seen[name] {
			t.Errorf("no file under deploy/ sets %s: extraction broken or files missing", name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		t.Fatalf("flags not in strata serve --help:\n%s", strings.Join(unknown, "\n"))
	}
}

// cluster runs local-cluster.sh with its ports in env.
type cluster struct {
	dir string
	env []string
}

func (c *cluster) run(timeout time.Duration, args ...string) (string, error) {
	return c.runIn("", timeout, args...)
}

// runIn runs local-cluster.sh with wd as the working directory ("": this
// package's), so the script must find its repository and binaries itself.
func (c *cluster) runIn(wd string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	script, err := filepath.Abs("local-cluster.sh")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, script, append(args, "--dir", c.dir)...)
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), c.env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pids returns the pids local-cluster.sh recorded.
func (c *cluster) pids() map[string]int {
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.pid"))
	pids := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie has exited).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// kcatBroker is a replica or ISR member in `kcat -L -J`.
type kcatBroker struct {
	ID int `json:"id"`
}

// kcatMetadata is the part of `kcat -L -J` the test reads.
type kcatMetadata struct {
	Brokers []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Partitions []struct {
			Replicas []kcatBroker `json:"replicas"`
			ISRs     []kcatBroker `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

func metadata(t *testing.T, broker string, topic ...string) kcatMetadata {
	t.Helper()
	args := []string{"-L", "-J", "-b", broker}
	if len(topic) > 0 {
		args = append(args, "-t", topic[0])
	}
	var md kcatMetadata
	if out := kcat(t, "", args...); json.Unmarshal([]byte(out), &md) != nil {
		t.Fatalf("kcat -L -J output is not JSON:\n%s", out)
	}
	return md
}

// TestLocalCluster starts deploy/local-cluster.sh on free ports, uses the
// cluster with kcat, restarts a broker from another directory, stops the
// cluster and checks every process exited.
func TestLocalCluster(t *testing.T) {
	testkit.NeedBinary(t, "etcd")
	testkit.NeedBinary(t, "kcat")
	// MinIO: $STRATA_MINIO_BIN, else the repository's .tools/bin (from
	// scripts/install-minio.sh), else one on PATH (a worktree shares the
	// main checkout's .tools through PATH).
	minio := os.Getenv("STRATA_MINIO_BIN")
	if minio == "" {
		minio, _ = filepath.Abs("../.tools/bin/minio")
		if _, err := os.Stat(minio); err != nil {
			if onPath, err := exec.LookPath("minio"); err == nil {
				minio = onPath
			}
		}
	}
	testkit.NeedBinary(t, minio)
	c, kafka := startLocalCluster(t, minio)
	if out, err := c.run(30*time.Second, "status"); err != nil || strings.Count(out, ": running") != 5 {
		t.Fatalf("status after start: %v\n%s", err, out)
	}
	useCluster(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(kafka)))
	restartBroker(t, c, net.JoinHostPort("127.0.0.1", strconv.Itoa(kafka+1)))

	pids := c.pids()
	if len(pids) != 5 {
		t.Fatalf("pid files: %v, want etcd, minio and 3 brokers", pids)
	}
	if out, err := c.run(3*time.Minute, "stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still runs after stop", name, pid)
		}
	}
	if out, err := c.run(30*time.Second, "status"); err == nil {
		t.Errorf("status after stop succeeded:\n%s", out)
	}
	brokerLog, err := os.ReadFile(filepath.Join(c.dir, "broker-1.log"))
	if err != nil || !bytes.Contains(brokerLog, []byte("broker stopped")) {
		t.Errorf("broker 1 did not stop cleanly (err %v); log tail:\n%s", err, tail(brokerLog))
	}
}

// startLocalCluster runs local-cluster.sh start on free ports and returns
// the cluster and its first Kafka port. The ports are below the ephemeral
// range, yet another process may bind one between the check and the start:
// a start whose logs say a port is "already in use" is stopped and tried again
// on other ports. Any other failure shows the logs of the processes.
func startLocalCluster(t *testing.T, minio string) (*cluster, int) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		kafka := testkit.FreePorts(t, 3)
		c := &cluster{dir: t.TempDir(), env: []string{
			"CLUSTER_KAFKA_PORT=" + strconv.Itoa(kafka),
			"CLUSTER_HTTP_PORT=" + strconv.Itoa(testkit.FreePorts(t, 3)),
			"CLUSTER_ETCD_PORT=" + strconv.Itoa(testkit.FreePorts(t, 2)),
			"CLUSTER_MINIO_PORT=" + strconv.Itoa(testkit.FreePorts(t, 1)),
			"CLUSTER_MINIO_BIN=" + minio,
		}}
		out, err := c.run(4*time.Minute, "start")
		if err == nil {
			t.Cleanup(func() { // also after a failure: never leave processes behind
				if out, err := c.run(3*time.Minute, "stop"); err != nil {
					t.Errorf("cleanup stop: %v\n%s", err, out)
				}
			})
			return c, kafka
		}
		logs := c.logTails()
		if stopOut, stopErr := c.run(3*time.Minute, "stop"); stopErr != nil {
			t.Errorf("stop after a failed start: %v\n%s", stopErr, stopOut)
		}
		if attempt == 3 || !strings.Contains(logs, "already in use") {
			t.Fatalf("start (attempt %d): %v\n%s\n%s", attempt, err, out, logs)
		}
		t.Logf("start (attempt %d) lost a port race; trying other ports:\n%s", attempt, logs)
	}
}

// logTails returns the end of every process log in the cluster's directory.
func (c *cluster) logTails() string {
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "--- %s:\n%s\n", filepath.Base(f), tail(data))
	}
	return b.String()
}

// useCluster checks the metadata, produces records to a new topic and
// consumes them back.
func useCluster(t *testing.T, broker string) {
	t.Helper()
	if md := metadata(t, broker); len(md.Brokers) != 3 {
		t.Fatalf("kcat -L sees brokers %+v, want 3", md.Brokers)
	}
	const topic = "deploy-test"
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("record-%d", i))
	}
	kcat(t, strings.Join(want, "\n")+"\n", "-P", "-b", broker, "-t", topic, "-X", "acks=all")
	out := kcat(t, "", "-C", "-b", broker, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
	var got []string
	for s := bufio.NewScanner(strings.NewReader(out)); s.Scan(); {
		got = append(got, s.Text())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %q, want %q", got, want)
	}
	md := metadata(t, broker, topic)
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) == 0 || len(md.Topics[0].Partitions[0].Replicas) != 3 {
		t.Fatalf("topic %s metadata %+v: want replication factor 3 (--default-replication-factor)", topic, md.Topics)
	}
}

// restartBroker runs `restart 2` and `status` from a directory other than
// deploy/ and checks the effects: broker 2 is a new process on the same
// data directory, answers Metadata on its own port and rejoins the ISR of
// useCluster's topic.
func restartBroker(t *testing.T, c *cluster, broker2 string) {
	t.Helper()
	elsewhere := t.TempDir()
	before := c.pids()["broker-2"]
	dataBefore := dirNames(t, filepath.Join(c.dir, "broker-2"))
	if out, err := c.runIn(elsewhere, 30*time.Second, "restart", "9"); err == nil {
		t.Errorf("restart of a broker that does not exist succeeded:\n%s", out)
	}
	out, err := c.runIn(elsewhere, 3*time.Minute, "restart", "2")
	if err != nil {
		t.Fatalf("restart 2: %v\n%s\n%s", err, out, c.logTails())
	}
	t.Logf("restart 2 from %s:\n%s", elsewhere, out)
	after := c.pids()["broker-2"]
	if before == 0 || after == 0 || after == before || alive(before) || !alive(after) {
		t.Fatalf("broker-2 pid %d before restart (alive %v), %d after (alive %v)\n%s", before, alive(before), after, alive(after), out)
	}
	for _, name := range dataBefore {
		if _, err := os.Stat(filepath.Join(c.dir, "broker-2", name)); err != nil {
			t.Errorf("broker-2's data lost %s in the restart: %v", name, err)
		}
	}
	if md := metadata(t, broker2); len(md.Brokers) != 3 {
		t.Fatalf("broker 2 after restart: Metadata lists brokers %+v, want 3", md.Brokers)
	}
	testkit.WaitFor(t, 60*time.Second, "broker 2 back in the ISR of deploy-test", func() bool {
		md := metadata(t, broker2, "deploy-test")
		return len(md.Topics) == 1 && len(md.Topics[0].Partitions) > 0 &&
			slices.Contains(md.Topics[0].Partitions[0].ISRs, kcatBroker{ID: 2})
	})
	out, err = c.runIn(elsewhere, 30*time.Second, "status")
	if err != nil || strings.Count(out, ": running") != 5 || !strings.Contains(out, fmt.Sprintf("broker-2: running (pid %d)", after)) {
		t.Fatalf("status from %s after restart: %v\n%s", elsewhere, err, out)
	}
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("%s: %v (%d entries)", dir, err, len(entries))
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
