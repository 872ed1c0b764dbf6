package datadir

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/metadata"
)

func testLayout(t *testing.T) Layout {
	return Layout{Root: t.TempDir(), ValidTopic: func(name string) bool { return name != "" && !strings.Contains(name, " ") }}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func TestClaimEmptiesAnOlderTopicsDirectory(t *testing.T) {
	l := testLayout(t)
	dir := l.PartitionDir("t", 0)
	if err := Claim(dir, metadata.TopicID{1}); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(seg, []byte("records"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Claim(dir, metadata.TopicID{1}); err != nil || !exists(seg) {
		t.Fatalf("claiming again for the same id lost the log (err %v)", err)
	}
	if err := Claim(dir, metadata.TopicID{2}); err != nil || exists(seg) {
		t.Fatalf("a new topic of the same name kept the old log (err %v)", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, MetadataFile))
	if err != nil || string(got) != Metadata(metadata.TopicID{2}) {
		t.Fatalf("partition.metadata = %q, %v", got, err)
	}
	if !strings.HasPrefix(string(got), "version: 0\ntopic_id: ") {
		t.Fatalf("format changed: %q", got)
	}
}

func TestRemoveStrayJudgesOnlyPartitionDirs(t *testing.T) {
	l := testLayout(t)
	for name, id := range map[string]byte{"keep-0": 1, "wrongid-0": 1, "gone-3": 1} {
		if err := Claim(filepath.Join(l.Root, name), metadata.TopicID{id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"etcd", "nometa-0", "a b-1"} {
		if err := os.MkdirAll(filepath.Join(l.Root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]metadata.TopicID{"keep-0": {1}, "wrongid-0": {2}}
	l.RemoveStray(want, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for name, kept := range map[string]bool{"keep-0": true, "wrongid-0": false, "gone-3": false, "etcd": true, "nometa-0": true, "a b-1": true} {
		if got := exists(filepath.Join(l.Root, name)); got != kept {
			t.Errorf("%s: exists %v, want %v", name, got, kept)
		}
	}
}

func TestIsPartitionDir(t *testing.T) {
	l := testLayout(t)
	for name, want := range map[string]bool{"orders-0": true, "my-topic-12": true, "etcd": false, "x-": false, "-1": false, "x-y": false, "a b-1": false} {
		if got := l.IsPartitionDir(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}
