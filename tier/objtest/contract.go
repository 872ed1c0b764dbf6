// Package objtest holds the contract test table that every
// objstore.ObjectStore implementation must pass (memory, file, s3 on a real
// MinIO), so that backends cannot drift apart.
package objtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/tier/objstore"
)

// Options tune the contract for a backend.
type Options struct {
	// LargeSize is the size of the "large object" case; backends with a
	// multipart path set it above their threshold. Default 3 MiB.
	LargeSize int
	// Verify, if set, checks an object's content independently of the store
	// under test (e.g. with minio-go). want nil means "must not exist".
	Verify func(t *testing.T, key string, want []byte)
}

// Run runs every contract case against a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) objstore.ObjectStore, opts Options) {
	if opts.LargeSize == 0 {
		opts.LargeSize = 3 << 20
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, s objstore.ObjectStore, opts Options)
	}{
		{"PutStatReadRange", testPutStatRead},
		{"RangeBounds", testRangeBounds},
		{"NotFound", testNotFound},
		{"Overwrite", testOverwrite},
		{"List", testList},
		{"InvalidKeys", testInvalidKeys},
		{"ShortBody", testShortBody},
		{"LargeObject", testLarge},
		{"Concurrent", testConcurrent},
		{"CancelledContext", testCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t), opts) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// Payload returns n deterministic pseudo-random bytes.
func Payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// MustPut puts data under key or fails the test.
func MustPut(t *testing.T, s objstore.ObjectStore, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctx(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// MustRead reads [offset, offset+length) of key or fails the test.
func MustRead(t *testing.T, s objstore.ObjectStore, key string, offset, length int64) []byte {
	t.Helper()
	rc, err := s.ReadRange(ctx(t), key, offset, length)
	if err != nil {
		t.Fatalf("read %s [%d,+%d): %v", key, offset, length, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read body %s: %v", key, err)
	}
	return got
}

func testPutStatRead(t *testing.T, s objstore.ObjectStore, opts Options) {
	data := Payload(1, 100_000)
	MustPut(t, s, "c/topics/t-x/00000/a.seg", data)
	info, err := s.Stat(ctx(t), "c/topics/t-x/00000/a.seg")
	if err != nil || info.Size != int64(len(data)) || info.Key != "c/topics/t-x/00000/a.seg" {
		t.Fatalf("stat = %+v, %v; want size %d", info, err, len(data))
	}
	for _, r := range [][2]int64{{0, 100_000}, {0, 1}, {99_999, 1}, {12_345, 54_321}, {50_000, 0}, {100_000, 0}} {
		if got := MustRead(t, s, "c/topics/t-x/00000/a.seg", r[0], r[1]); !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: got %d bytes, not the data", r, len(got))
		}
	}
	if opts.Verify != nil {
		opts.Verify(t, "c/topics/t-x/00000/a.seg", data)
	}
	empty := []byte{}
	MustPut(t, s, "c/empty", empty)
	if info, err := s.Stat(ctx(t), "c/empty"); err != nil || info.Size != 0 {
		t.Fatalf("empty object stat = %+v, %v", info, err)
	}
}

func testRangeBounds(t *testing.T, s objstore.ObjectStore, _ Options) {
	MustPut(t, s, "r/obj", Payload(2, 1000))
	for _, r := range [][2]int64{{-1, 10}, {0, -1}, {990, 11}, {1001, 0}, {500, 1000}} {
		rc, err := s.ReadRange(ctx(t), "r/obj", r[0], r[1])
		if err == nil {
			rc.Close()
			t.Fatalf("range %v of a 1000-byte object: no error", r)
		}
		if !errors.Is(err, objstore.ErrInvalidRange) {
			t.Fatalf("range %v: %v, want ErrInvalidRange", r, err)
		}
	}
}

func testNotFound(t *testing.T, s objstore.ObjectStore, opts Options) {
	_, err := s.Stat(ctx(t), "nf/missing")
	if err == nil || !s.IsNotFound(err) || objstore.IsTransient(err) {
		t.Fatalf("stat missing: %v (IsNotFound %v)", err, s.IsNotFound(err))
	}
	_, err = s.ReadRange(ctx(t), "nf/missing", 0, 1)
	if err == nil || !s.IsNotFound(err) {
		t.Fatalf("read missing: %v", err)
	}
	if err := s.Delete(ctx(t), "nf/missing"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	MustPut(t, s, "nf/present/x", []byte("abc"))
	if _, err := s.Stat(ctx(t), "nf/present"); err == nil || !s.IsNotFound(err) {
		t.Fatalf("stat of a key prefix: %v, want not found", err)
	}
	if err := s.Delete(ctx(t), "nf/present/x"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.Stat(ctx(t), "nf/present/x"); !s.IsNotFound(err) {
		t.Fatalf("stat after delete: %v", err)
	}
	if s.IsNotFound(errors.New("other")) || s.IsNotFound(nil) {
		t.Fatal("IsNotFound true for an unrelated error")
	}
	if opts.Verify != nil {
		opts.Verify(t, "nf/present/x", nil)
	}
}

func testOverwrite(t *testing.T, s objstore.ObjectStore, opts Options) {
	MustPut(t, s, "ow/k", []byte("first version"))
	MustPut(t, s, "ow/k", []byte("second"))
	if got := MustRead(t, s, "ow/k", 0, 6); string(got) != "second" {
		t.Fatalf("after overwrite: %q", got)
	}
	if info, _ := s.Stat(ctx(t), "ow/k"); info.Size != 6 {
		t.Fatalf("size after overwrite %d", info.Size)
	}
	if opts.Verify != nil {
		opts.Verify(t, "ow/k", []byte("second"))
	}
}

func testList(t *testing.T, s objstore.ObjectStore, _ Options) {
	keys := []string{"l/b/2", "l/a/1", "l/a-x/3", "l/ab", "l/a/sub/4", "m/other"}
	for i, k := range keys {
		MustPut(t, s, k, Payload(uint64(i), i+1))
	}
	check := func(prefix string, want ...string) {
		t.Helper()
		got, err := s.List(ctx(t), prefix)
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		var names []string
		for _, o := range got {
			names = append(names, o.Key)
			if o.Size <= 0 {
				t.Fatalf("list %q: %+v has no size", prefix, o)
			}
		}
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Fatalf("list %q = %v, want %v", prefix, names, want)
		}
	}
	check("l/a/", "l/a/1", "l/a/sub/4")
	check("l/a", "l/a-x/3", "l/a/1", "l/a/sub/4", "l/ab")
	check("l/", "l/a-x/3", "l/a/1", "l/a/sub/4", "l/ab", "l/b/2")
	check("nothing/", []string{}...)
	check("", "l/a-x/3", "l/a/1", "l/a/sub/4", "l/ab", "l/b/2", "m/other")
	if got, _ := s.List(ctx(t), "l/b/"); len(got) != 1 || got[0].Size != 1 {
		t.Fatalf("list l/b/ sizes: %+v", got)
	}
}

func testInvalidKeys(t *testing.T, s objstore.ObjectStore, _ Options) {
	bad := []string{"", "/abs", "a//b", "a/../b", "..", "../escape", "a/./b", "a/", "a\\b", "nul\x00", strings.Repeat("k", 1025)}
	for _, k := range bad {
		if err := s.Put(ctx(t), k, strings.NewReader("x"), 1); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("put %q: %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Stat(ctx(t), k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("stat %q: %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.ReadRange(ctx(t), k, 0, 1); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("read %q: %v, want ErrInvalidKey", k, err)
		}
		if err := s.Delete(ctx(t), k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("delete %q: %v, want ErrInvalidKey", k, err)
		}
	}
	if _, err := s.List(ctx(t), "../"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Fatalf("list ../: %v", err)
	}
}

// onlyReader hides every method but Read (no ReaderAt, no Seeker).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testShortBody(t *testing.T, s objstore.ObjectStore, opts Options) {
	for _, body := range []io.Reader{bytes.NewReader([]byte("12345")), onlyReader{strings.NewReader("12345")}} {
		for _, size := range []int64{4, 6} {
			err := s.Put(ctx(t), "sb/k", body, size)
			if !errors.Is(err, objstore.ErrShortBody) {
				t.Fatalf("put 5 bytes as %d (%T): %v, want ErrShortBody", size, body, err)
			}
			if _, err := s.Stat(ctx(t), "sb/k"); !s.IsNotFound(err) {
				t.Fatalf("a failed put left an object: %v", err)
			}
			if r, ok := body.(*bytes.Reader); ok {
				r.Seek(0, io.SeekStart)
			} else {
				body = onlyReader{strings.NewReader("12345")}
			}
		}
	}
	if opts.Verify != nil {
		opts.Verify(t, "sb/k", nil)
	}
}

func testLarge(t *testing.T, s objstore.ObjectStore, opts Options) {
	data := Payload(7, opts.LargeSize)
	// Once through io.ReaderAt (parallel parts), once as a plain stream.
	bodies := map[string]io.Reader{"readerat": bytes.NewReader(data), "stream": onlyReader{bytes.NewReader(data)}}
	for name, body := range bodies {
		key := "large/" + name
		if err := s.Put(ctx(t), key, body, int64(len(data))); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if got := MustRead(t, s, key, 0, int64(len(data))); !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes, differ", key, len(got))
		}
		mid := int64(len(data) / 3)
		if got := MustRead(t, s, key, mid, 5<<10); !bytes.Equal(got, data[mid:mid+5<<10]) {
			t.Fatalf("%s: middle range differs", key)
		}
		if opts.Verify != nil {
			opts.Verify(t, key, data)
		}
	}
}

func testConcurrent(t *testing.T, s objstore.ObjectStore, _ Options) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Go(func() {
			key := fmt.Sprintf("cc/%d/obj", i)
			data := Payload(uint64(100+i), 10_000+i)
			if err := s.Put(ctx(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
				errs <- err
				return
			}
			got := MustRead(t, s, key, 0, int64(len(data)))
			if !bytes.Equal(got, data) {
				errs <- fmt.Errorf("%s differs", key)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, err := s.List(ctx(t), "cc/"); err != nil || len(got) != 8 {
		t.Fatalf("list after concurrent puts: %d objects, %v", len(got), err)
	}
}

func testCancelled(t *testing.T, s objstore.ObjectStore, _ Options) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(c, "cx/k", strings.NewReader("x"), 1); err == nil {
		t.Fatal("put with a cancelled context succeeded")
	}
	if _, err := s.Stat(c, "cx/k"); err == nil {
		t.Fatal("stat with a cancelled context succeeded")
	}
	if objstore.IsTransient(context.Canceled) {
		t.Fatal("a cancelled context counts as transient")
	}
}
