package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// runKcat runs kcat with stdin and returns stdout; a non-zero exit fails t.
func runKcat(t *testing.T, kcat string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestKcat drives the broker with librdkafka through kcat: metadata, produce,
// consume from the beginning to the end, and timestamp look-up.
func TestKcat(t *testing.T) {
	kcat := testkit.NeedBinary(t, "kcat")
	b := StartBroker(t)
	const topic = "kcat-lines"
	createTopic(t, b.Admin(), topic, 1, nil)

	meta := runKcat(t, kcat, "", "-b", b.Addr, "-L")
	for _, want := range []string{
		fmt.Sprintf("broker %d at %s", b.NodeID, b.Addr),
		fmt.Sprintf("topic \"%s\" with 1 partitions", topic),
	} {
		if !strings.Contains(meta, want) {
			t.Fatalf("kcat -L output lacks %q:\n%s", want, meta)
		}
	}

	var lines []string
	for i := 0; i < 500; i++ {
		lines = append(lines, fmt.Sprintf("line %d %s", i, strings.Repeat("z", i%40)))
	}
	input := strings.Join(lines, "\n") + "\n"
	runKcat(t, kcat, input, "-b", b.Addr, "-P", "-t", topic, "-p", "0")

	got := runKcat(t, kcat, "", "-b", b.Addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")
	if got != input {
		t.Fatalf("kcat -C read back %d bytes, want the %d produced:\n%.2000s", len(got), len(input), got)
	}
	withOffsets := runKcat(t, kcat, "", "-b", b.Addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %s\n")
	for i, line := range strings.Split(strings.TrimSuffix(withOffsets, "\n"), "\n") {
		if want := fmt.Sprintf("%d %s", i, lines[i]); line != want {
			t.Fatalf("kcat -C record %d: %q, want %q", i, line, want)
		}
	}

	kcatTimestampQuery(t, kcat, b)
}

// kcatTimestampQuery produces records with known timestamps (via franz-go,
// since kcat -P cannot set them) and checks kcat -Q's answers.
func kcatTimestampQuery(t *testing.T, kcat string, b *Broker) {
	const topic = "kcat-ts"
	createTopic(t, b.Admin(), topic, 1, map[string]string{"retention.ms": "-1"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 10; i++ {
		produceSync(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "ts-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	for _, tc := range []struct {
		ts   time.Time
		want int64
	}{
		{base.Add(-time.Minute), 0},
		{base, 0},
		{base.Add(3 * time.Second), 3},
		{base.Add(3*time.Second + time.Millisecond), 4},
		{base.Add(9 * time.Second), 9},
	} {
		out := runKcat(t, kcat, "", "-b", b.Addr, "-Q", "-t", fmt.Sprintf("%s:0:%d", topic, tc.ts.UnixMilli()))
		want := fmt.Sprintf("%s [0] offset %d", topic, tc.want)
		if !strings.Contains(out, want) {
			t.Fatalf("kcat -Q at %d: %q, want %q", tc.ts.UnixMilli(), out, want)
		}
	}
}
