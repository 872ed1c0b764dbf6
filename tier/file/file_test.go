package file

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/tier/objstore"
	"github.com/strata-log/strata/tier/objtest"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	objtest.Run(t, func(t *testing.T) objstore.ObjectStore {
		s := open(t)
		return s
	}, objtest.Options{Verify: nil})
}

func TestObjectsAreFilesUnderRoot(t *testing.T) {
	s := open(t)
	objtest.MustPut(t, s, "c/topics/t-x/00000/a.seg", []byte("hello"))
	got, err := os.ReadFile(filepath.Join(s.Root(), "c", "topics", "t-x", "00000", "a.seg"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("file content %q, %v", got, err)
	}
	temps, _ := os.ReadDir(filepath.Join(s.Root(), tempDirName))
	if len(temps) != 0 {
		t.Fatalf("temp files left after put: %v", temps)
	}
}

func TestKeysCannotEscapeRoot(t *testing.T) {
	parent := t.TempDir()
	s, err := Open(filepath.Join(parent, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../outside", "a/../../outside", "..", tempDirName + "/x", tempDirName} {
		if err := s.Put(context.Background(), key, strings.NewReader("x"), 1); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("put %q: %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "outside")); !os.IsNotExist(err) {
		t.Fatalf("a file appeared outside the root: %v", err)
	}
}

func TestFailedPutLeavesNothing(t *testing.T) {
	s := open(t)
	err := s.Put(context.Background(), "c/k", bytes.NewReader([]byte("abc")), 10)
	if !errors.Is(err, objstore.ErrShortBody) {
		t.Fatalf("put: %v", err)
	}
	temps, _ := os.ReadDir(filepath.Join(s.Root(), tempDirName))
	if len(temps) != 0 {
		t.Fatalf("temp files left after a failed put: %d", len(temps))
	}
	if objs, _ := s.List(context.Background(), ""); len(objs) != 0 {
		t.Fatalf("objects after a failed put: %v", objs)
	}
}

func TestTempFilesHiddenAndStaleOnesRemoved(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, tempDirName, "put-stale")
	fresh := filepath.Join(dir, tempDirName, "put-fresh")
	os.WriteFile(stale, []byte("partial"), 0o644)
	os.WriteFile(fresh, []byte("in progress"), 0o644)
	old := time.Now().Add(-2 * StaleTempAge)
	os.Chtimes(stale, old, old)
	if objs, _ := s.List(context.Background(), ""); len(objs) != 0 {
		t.Fatalf("List shows temp files: %v", objs)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temp file (another writer's) was removed: %v", err)
	}
}

func TestDeleteRemovesEmptyDirectories(t *testing.T) {
	s := open(t)
	objtest.MustPut(t, s, "c/topics/t-x/00000/a.seg", []byte("a"))
	objtest.MustPut(t, s, "c/topics/t-x/topic.json", []byte("{}"))
	if err := s.Delete(context.Background(), "c/topics/t-x/00000/a.seg"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "c/topics/t-x/00000")); !os.IsNotExist(err) {
		t.Fatalf("empty partition directory kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "c/topics/t-x/topic.json")); err != nil {
		t.Fatalf("sibling object lost: %v", err)
	}
	if _, err := os.Stat(s.Root()); err != nil {
		t.Fatalf("root removed: %v", err)
	}
}
