package e2e

// Every client command of the strata binary against a SASL_SSL listener
// (SCRAM-SHA-512 over TLS with the test CA), all with one shared set of
// connection flags; then a subset with the same settings from a profile
// file and from STRATA_* variables; then the failures a misconfigured
// client meets (wrong password, no TLS), which must end in bounded time
// with a one-line reason. Effects are checked through franz-go as well as
// through the commands' own output. Not here: restore (it needs a bucket)
// and tier (it talks HTTP to the broker's admin address, not Kafka, so none
// of these settings apply).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

const (
	secureAdmin     = "admin"
	secureAdminPass = "admin-secret"
	secureTopic     = "secure-events" // one partition: consume order is produce order
	secureScratch   = "secure-scratch"
	secureGroup     = "secure-group"
	// A failing command must say why within this long, not hang on retries.
	secureFailBound = 15 * time.Second
)

// secureCLI is a SASL_SSL broker and the settings the strata client
// commands reach it with.
type secureCLI struct {
	b        *Broker
	env      *secureEnv
	dir      string
	home     string // every child's HOME: no default profile of the machine applies
	passFile string // the admin's password
	flags    []string
}

func newSecureCLI(t *testing.T) *secureCLI {
	t.Helper()
	env := newSecureEnv(t)
	// The admin is a bootstrap SCRAM user and a super user, as an
	// operator's first account would be.
	users, err := os.ReadFile(env.usersFile)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, env.usersFile, string(users)+secureAdmin+":"+secureAdminPass+"\n")
	b := StartBroker(t, withListeners(Listener{Name: "SASL_SSL", Protocol: "SASL_SSL"}),
		withArgs(append(env.saslArgs(), "--authorizer", "--super-users", "User:"+secureAdmin+";User:broker")...))
	dir := t.TempDir()
	s := &secureCLI{b: b, env: env, dir: dir, home: filepath.Join(dir, "home"), passFile: filepath.Join(dir, "admin-password")}
	if err := os.MkdirAll(s.home, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.passFile, secureAdminPass+"\n")
	s.flags = []string{"--brokers", b.Addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", secureAdmin,
		"--sasl-password-file", s.passFile, "--tls-ca-file", env.files.CA}
	return s
}

// client is a franz-go client authenticated as the admin, to check what
// the commands did.
func (s *secureCLI) client(opts ...kgo.Opt) *kgo.Client {
	return s.b.Client(append(s.env.scramOpts(secureAdmin, secureAdminPass), opts...)...)
}

// runEnv runs strata with stdin and the extra environment (beside HOME
// and the test's environment without STRATA_* variables), and returns its
// output, exit code and run time. It fails t only if the binary could not
// run or overran 30 s.
func (s *secureCLI) runEnv(t *testing.T, extraEnv []string, stdin string, args ...string) (cliResult, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	cmd.Env = append(append(testkit.EnvWithout("STRATA_"), "HOME="+s.home), extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("strata %s: %v after %v\n%s", strings.Join(args, " "), err, elapsed.Round(time.Millisecond), stderr.String())
	}
	return cliResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}, elapsed
}

// okEnv runs a command that must succeed and returns its stdout.
func (s *secureCLI) okEnv(t *testing.T, extraEnv []string, stdin string, args ...string) string {
	t.Helper()
	res, _ := s.runEnv(t, extraEnv, stdin, args...)
	if res.code != 0 {
		t.Fatalf("strata %s: exit %d\n%s\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// ok runs a command with the shared connection flags.
func (s *secureCLI) ok(t *testing.T, args ...string) string {
	t.Helper()
	return s.okEnv(t, nil, "", append(args, s.flags...)...)
}

// okInput is ok with stdin.
func (s *secureCLI) okInput(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return s.okEnv(t, nil, stdin, append(args, s.flags...)...)
}

// mustMatch fails t unless out matches every pattern.
func mustMatch(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("%s lacks %s:\n%s", what, p, out)
		}
	}
}

func numberedLines(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s-%d\n", prefix, i)
	}
	return b.String()
}

func TestCLISecure(t *testing.T) {
	s := newSecureCLI(t)
	t.Run("topics", s.checkTopics)
	t.Run("produce and consume", s.checkProduceConsume)
	t.Run("groups", s.checkGroups)
	t.Run("cluster and txn", s.checkClusterTxn)
	t.Run("users acls quotas", s.checkUsersACLsQuotas)
	t.Run("profile and env", s.checkProfileEnv)
	t.Run("wrong password", s.checkWrongPassword)
	t.Run("no TLS", s.checkNoTLS)
	t.Run("untrusted CA", s.checkUntrustedCA)
}

func (s *secureCLI) checkTopics(t *testing.T) {
	mustMatch(t, "topic create", s.ok(t, "topic", "create", secureTopic, "--partitions", "1"), secureTopic)
	s.ok(t, "topic", "create", secureScratch, "--partitions", "1", "--config", "retention.ms=3600000")
	mustMatch(t, "topic list", s.ok(t, "topic", "list"), `(?m)^`+secureTopic+`\s`, `(?m)^`+secureScratch+`\s`)
	mustMatch(t, "topic describe", s.ok(t, "topic", "describe", secureScratch),
		`(?m)^topic `+secureScratch+`\s`, `retention\.ms=3600000 \(dynamic_topic_config\)`)

	s.ok(t, "topic", "alter", secureScratch, "--set", "retention.ms=7200000", "--set", "cleanup.policy=compact")
	adm := kadm.NewClient(s.client())
	ctx := testCtx(t, 20*time.Second)
	configs, err := adm.DescribeTopicConfigs(ctx, secureScratch)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(secureScratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.ms"] != "7200000" || got["cleanup.policy"] != "compact" {
		t.Errorf("after topic alter: retention.ms=%s cleanup.policy=%s", got["retention.ms"], got["cleanup.policy"])
	}

	mustMatch(t, "topic add-partitions", s.ok(t, "topic", "add-partitions", secureScratch, "--partitions", "3"),
		secureScratch+" now has 3 partitions")
	if topics, err := adm.ListTopics(ctx, secureScratch); err != nil || len(topics[secureScratch].Partitions) != 3 {
		t.Errorf("after add-partitions: %v %+v", err, topics[secureScratch])
	}

	s.ok(t, "topic", "delete", secureScratch)
	testkit.WaitFor(t, 10*time.Second, "the deleted topic to leave the list", func() bool {
		return !strings.Contains(s.ok(t, "topic", "list"), secureScratch)
	})
}

func (s *secureCLI) checkProduceConsume(t *testing.T) {
	input := numberedLines("secure", 0, 20)
	res, _ := s.runEnv(t, nil, input, append([]string{"produce", "--topic", secureTopic}, s.flags...)...)
	if res.code != 0 || !strings.Contains(res.stderr, "produced 20 records to "+secureTopic) {
		t.Fatalf("produce: exit %d\n%s", res.code, res.stderr)
	}
	if out := s.ok(t, "consume", "--topic", secureTopic, "--from-beginning", "--exit-at-end"); out != input {
		t.Errorf("consume --exit-at-end read:\n%s\nwant the 20 lines produced", out)
	}
	if out := s.ok(t, "consume", "--topic", secureTopic, "--from-beginning", "--count", "5"); out != numberedLines("secure", 0, 5) {
		t.Errorf("consume --count 5 read:\n%s", out)
	}
}

func (s *secureCLI) checkGroups(t *testing.T) {
	// A consumer of the group reads 10 records and commits them on exit,
	// leaving the group idle with lag 10.
	out := s.ok(t, "consume", "--topic", secureTopic, "--group", secureGroup, "--from-beginning", "--count", "10")
	if out != numberedLines("secure", 0, 10) {
		t.Fatalf("consume --group read:\n%s", out)
	}
	mustMatch(t, "group list", s.ok(t, "group", "list"), `(?m)^`+secureGroup+`\s`)
	mustMatch(t, "group describe", s.ok(t, "group", "describe", secureGroup),
		`(?m)^\s+`+secureTopic+`\s+0\s+10\s+20\s+10\s`) // TOPIC PARTITION COMMITTED END LAG
	mustMatch(t, "group lag", s.ok(t, "group", "lag", secureGroup), `(?m)^`+secureGroup+`\s+`+secureTopic+`\s+0\s+10\s+20\s+10\s`)

	plan := s.ok(t, "group", "reset", secureGroup, "--to-earliest", "--topic", secureTopic)
	mustMatch(t, "group reset plan", plan, `(?m)^`+secureGroup+`\s+`+secureTopic+`\s+0\s+10\s+0\s`)
	adm := kadm.NewClient(s.client())
	ctx := testCtx(t, 20*time.Second)
	committed := func() int64 {
		t.Helper()
		offsets, err := adm.FetchOffsets(ctx, secureGroup)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offsets.Lookup(secureTopic, 0)
		if !ok {
			return -1
		}
		return o.At
	}
	if at := committed(); at != 10 {
		t.Fatalf("after the reset plan the group is at %d, want 10 (a plan changes nothing)", at)
	}
	s.ok(t, "group", "reset", secureGroup, "--to-earliest", "--topic", secureTopic, "--execute")
	if at := committed(); at != 0 {
		t.Fatalf("after reset --execute the group is at %d, want 0", at)
	}

	mustMatch(t, "group delete-offsets", s.ok(t, "group", "delete-offsets", secureGroup, "--topic", secureTopic),
		`(?m)^`+secureGroup+`\s+`+secureTopic+`\s+0\s+deleted$`)
	if at := committed(); at != -1 {
		t.Fatalf("after delete-offsets the group is at %d, want no offset", at)
	}
	s.ok(t, "group", "delete", secureGroup)
	if groups, err := adm.ListGroups(ctx); err != nil || len(groups) != 0 {
		t.Fatalf("groups after group delete: %v %+v", err, groups)
	}
}

func (s *secureCLI) checkClusterTxn(t *testing.T) {
	mustMatch(t, "cluster info", s.ok(t, "cluster", "info"),
		fmt.Sprintf(`(?m)^\s+%d\s+%s\s`, s.b.NodeID, regexp.QuoteMeta(s.b.Addr)),
		fmt.Sprintf(`(?m)^controller:\s+%d$`, s.b.NodeID))
	mustMatch(t, "cluster config", s.ok(t, "cluster", "config", "--broker", fmt.Sprint(s.b.NodeID)),
		`(?m)^\s+log\.cleaner\.backoff\.ms\s+\d+\s+static_broker_config\s`)

	const txnID = "secure-txn"
	cl := txnClient(t, s.b, txnID, s.env.scramOpts(secureAdmin, secureAdminPass)...)
	runTxn(t, cl, true, txnRecords(secureTopic, "txn", 2, 1)...)
	mustMatch(t, "txn list", s.ok(t, "txn", "list"), `(?m)^`+txnID+`\s`)
	mustMatch(t, "txn describe", s.ok(t, "txn", "describe", txnID), `transaction `+txnID+`\s+state CompleteCommit`)
}

func (s *secureCLI) checkUsersACLsQuotas(t *testing.T) {
	s.okInput(t, "carol-secret\n", "user", "create", "carol", "--mechanism", "SCRAM-SHA-512")
	if out := s.ok(t, "user", "list"); !strings.Contains(out, "carol") || strings.Contains(out, "carol-secret") {
		t.Errorf("user list:\n%s", out)
	}
	if err := probeMetadata(t, s.b.Addr, s.env.scramOpts("carol", "carol-secret")...); err != nil {
		t.Errorf("carol cannot authenticate after user create: %v", err)
	}

	s.ok(t, "acl", "create", "--allow-principal", "User:carol", "--operation", "read", "--topic", secureTopic)
	mustMatch(t, "acl list", s.ok(t, "acl", "list", "--topic", secureTopic), `User:carol`, `READ`)
	mustMatch(t, "acl delete", s.ok(t, "acl", "delete", "--allow-principal", "User:carol", "--topic", secureTopic), `deleted`)
	if out := s.ok(t, "acl", "list", "--topic", secureTopic); strings.Contains(out, "User:carol") {
		t.Errorf("acl list after the delete:\n%s", out)
	}

	s.ok(t, "user", "delete", "carol")
	if out := s.ok(t, "user", "list"); strings.Contains(out, "carol") {
		t.Errorf("user list after the delete:\n%s", out)
	}

	s.ok(t, "quota", "set", "--client-id", "secure-client", "--producer-byte-rate", "1048576")
	mustMatch(t, "quota describe", s.ok(t, "quota", "describe", "--client-id", "secure-client"),
		`(?m)^\{client-id=secure-client\}\s+producer_byte_rate=1048576$`)
}

func (s *secureCLI) checkProfileEnv(t *testing.T) {
	profile := filepath.Join(s.dir, "client.yaml")
	writeFile(t, profile, fmt.Sprintf("# the admin on the secure test cluster\nbrokers: %s\nsasl-mechanism: SCRAM-SHA-512\n"+
		"sasl-username: %s\nsasl-password-file: %s\ntls: true\ntls-ca-file: %s\n", s.b.Addr, secureAdmin, s.passFile, s.env.files.CA))
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"STRATA_PROFILE", []string{"STRATA_PROFILE=" + profile}, nil},
		{"--profile", nil, []string{"--profile", profile}},
		{"STRATA_env", []string{"STRATA_BROKERS=" + s.b.Addr, "STRATA_SASL_MECHANISM=SCRAM-SHA-512", "STRATA_SASL_USERNAME=" + secureAdmin,
			"STRATA_SASL_PASSWORD_FILE=" + s.passFile, "STRATA_TLS=true", "STRATA_TLS_CA_FILE=" + s.env.files.CA}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(stdin string, args ...string) string {
				return s.okEnv(t, c.env, stdin, append(args, c.args...)...)
			}
			topic := "secure-" + strings.ToLower(strings.Trim(c.name, "-_"))
			topic = strings.ReplaceAll(topic, "_", "-")
			s.ok(t, "topic", "create", topic, "--partitions", "1")
			mustMatch(t, "topic list", run("", "topic", "list"), `(?m)^`+topic+`\s`)
			input := numberedLines(topic, 0, 5)
			run(input, "produce", "--topic", topic)
			if out := run("", "consume", "--topic", topic, "--from-beginning", "--count", "5"); out != input {
				t.Errorf("consume read:\n%s\nwant:\n%s", out, input)
			}
			if out := run("", "consume", "--topic", topic, "--group", topic, "--from-beginning", "--count", "5"); out != input {
				t.Errorf("consume --group read:\n%s\nwant:\n%s", out, input)
			}
			mustMatch(t, "group list", run("", "group", "list"), `(?m)^`+topic+`\s`)
			mustMatch(t, "cluster info", run("", "cluster", "info"), fmt.Sprintf(`(?m)^controller:\s+%d$`, s.b.NodeID))
			s.ok(t, "acl", "create", "--allow-principal", "User:alice", "--operation", "write", "--topic", topic)
			mustMatch(t, "acl list", run("", "acl", "list", "--topic", topic), `User:alice`, `WRITE`)
		})
	}
}

// failingCommands are one of each client command, with the arguments it
// needs to reach the broker.
var failingCommands = [][]string{
	{"topic", "create", "secure-never"}, {"topic", "list"}, {"topic", "describe", secureTopic},
	{"topic", "alter", secureTopic, "--set", "retention.ms=1000"}, {"topic", "add-partitions", secureTopic, "--partitions", "9"},
	{"topic", "delete", secureTopic}, {"produce", "--topic", secureTopic}, {"consume", "--topic", secureTopic, "--from-beginning"},
	{"group", "list"}, {"group", "describe", secureGroup}, {"group", "lag"}, {"group", "reset", secureGroup, "--to-earliest"},
	{"group", "delete-offsets", secureGroup, "--topic", secureTopic}, {"group", "delete", secureGroup},
	{"cluster", "info"}, {"cluster", "config"}, {"txn", "list"}, {"user", "list"}, {"acl", "list"},
	{"quota", "describe"},
}

// checkFails runs every failing command with flags and wants exit 1
// within secureFailBound and a stderr of one line, "strata <command>: "
// and then reason.
func (s *secureCLI) checkFails(t *testing.T, reason string, flags []string) {
	want := regexp.MustCompile(`^strata \S+: ` + reason + `\n$`)
	for _, cmd := range failingCommands {
		res, elapsed := s.runEnv(t, nil, "a line\n", append(append([]string{}, cmd...), flags...)...)
		name := strings.Join(cmd, " ")
		switch {
		case res.code != 1:
			t.Errorf("%s: exit %d, want 1\n%s\n%s", name, res.code, res.stdout, res.stderr)
		case elapsed > secureFailBound:
			t.Errorf("%s: failed after %v, want under %v", name, elapsed, secureFailBound)
		case !want.MatchString(res.stderr):
			t.Errorf("%s printed:\n%s\nwant one line matching %s", name, res.stderr, want)
		}
	}
	if res, _ := s.runEnv(t, nil, "", append([]string{"topic", "list"}, flags...)...); res.code != 0 {
		t.Logf("for example: %s", strings.TrimSpace(res.stderr))
	}
}

func (s *secureCLI) checkWrongPassword(t *testing.T) {
	wrong := filepath.Join(s.dir, "wrong-password")
	writeFile(t, wrong, "not-the-password\n")
	flags := []string{"--brokers", s.b.Addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", secureAdmin,
		"--sasl-password-file", wrong, "--tls-ca-file", s.env.files.CA}
	s.checkFails(t, `SASL authentication failed at `+regexp.QuoteMeta(s.b.Addr)+` as user "admin" \(SCRAM-SHA-512\)`+
		`(: [^\n]*invalid credentials[^\n]*)?; check --sasl-username and --sasl-password-file`, flags)
}

func (s *secureCLI) checkNoTLS(t *testing.T) {
	flags := []string{"--brokers", s.b.Addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", secureAdmin,
		"--sasl-password-file", s.passFile}
	s.checkFails(t, `the broker at `+regexp.QuoteMeta(s.b.Addr)+` closed the connection without answering: `+
		`it most likely is a TLS listener; connect with --tls \(or --tls-ca-file with the cluster's CA\)`, flags)
}

// checkUntrustedCA: --tls with the system roots, which do not hold the
// test CA.
func (s *secureCLI) checkUntrustedCA(t *testing.T) {
	flags := []string{"--brokers", s.b.Addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", secureAdmin,
		"--sasl-password-file", s.passFile, "--tls"}
	s.checkFails(t, `TLS: the certificate of the broker at `+regexp.QuoteMeta(s.b.Addr)+` is not signed by a CA this client trusts; `+
		`give the cluster's CA with --tls-ca-file \(x509: [^\n]+\)`, flags)
}
