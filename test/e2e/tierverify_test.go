package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// tierVerify runs `strata tier verify` against b and returns its output
// and exit code.
func tierVerify(t *testing.T, b *Broker, objects string) (string, int) {
	t.Helper()
	cmd := exec.Command(strataBin, "tier", "verify", "--http", b.HTTPAddr, "--object-store", "file://"+objects)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("tier verify: %v\n%s", err, out)
	return "", -1
}

// TestTierVerify: `strata tier verify` reports no problem on a
// healthy bucket; after the test deletes one object and plants an orphan
// (a copy of an object under a key no manifest entry names), it names both
// and exits 1.
func TestTierVerify(t *testing.T) {
	b := StartBroker(t, withArgs("--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms"))
	const topic = "verify"
	createTopic(t, b.Admin(), topic, 1, map[string]string{"internal.segment.bytes": "16384"})
	cl := b.Client()
	for i := range 400 {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%04d-%s", i, strings.Repeat("v", 200)))}
		if err := cl.ProduceSync(testCtx(t, 30*time.Second), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "segments tiered", func() bool { return allSealedUploaded(t, b, topic, 1) })
	objects := filepath.Join(b.DataDir, "objects")
	out, code := tierVerify(t, b, objects)
	if code != 0 || !strings.Contains(out, "0 problems") {
		t.Fatalf("healthy bucket: exit %d\n%s", code, out)
	}
	var segs []string
	err := filepath.WalkDir(objects, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".seg") {
			segs = append(segs, path)
		}
		return err
	})
	if err != nil || len(segs) < 2 {
		t.Fatalf("%d objects in the bucket (%v): want several", len(segs), err)
	}
	gone := segs[0]
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(filepath.Dir(segs[1]), "00000000000099999999-1-00000000-0000-0000-0000-000000000000.seg")
	if err := os.WriteFile(orphan, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = tierVerify(t, b, objects)
	if code != 1 || !strings.Contains(out, "missing object: ") || !strings.Contains(out, filepath.Base(gone)) ||
		!strings.Contains(out, "orphan object: ") || !strings.Contains(out, filepath.Base(orphan)) ||
		!strings.Contains(out, "2 problems: 1 missing, 0 size mismatches, 0 corrupt, 1 orphans") {
		t.Fatalf("after deleting %s and planting %s: exit %d\n%s", gone, orphan, code, out)
	}
}
