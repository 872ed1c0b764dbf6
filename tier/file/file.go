// Package file is the directory backend of the tier's object store: each
// object is a file <root>/<key>, so a local disk or a NAS mount can hold the
// history tier (the default of `strata serve`: <data-dir>/objects).
//
// # Layout
//
//	<root>/<key>                 one file per object; key elements are directories
//	<root>/.strata-tmp/<random>  an object being written
//
// Put writes the body to a new temp file in .strata-tmp (same file system as
// the objects, so rename is atomic), fsyncs it, renames it over <root>/<key>
// and fsyncs the key's directory: a reader sees the previous object, the new
// one whole, or nothing. Temp files left by a crash are removed by Open when
// older than StaleTempAge (others may be writing into a shared mount).
// Keys are checked by objstore.ValidateKey (no "..", ".", empty elements or
// backslashes), so a key can never name a path outside root; the first
// element may not be ".strata-tmp". Directories emptied by Delete are removed
// on a best-effort basis.
package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/strata-log/strata/tier/objstore"
)

// tempDirName holds objects being written. Part of the directory format; never change.
const tempDirName = ".strata-tmp"

// StaleTempAge: temp files older than this are leftovers of a crash.
const StaleTempAge = time.Hour

// Store is a directory-backed objstore.ObjectStore. It holds no mutable
// state; the file system orders concurrent operations.
type Store struct {
	root string
}

var _ objstore.ObjectStore = (*Store)(nil)

// Open returns a store rooted at dir, creating it if needed, and removes
// stale temp files.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("file: empty directory")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, tempDirName), 0o755); err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	s := &Store{root: root}
	s.removeStaleTemps(time.Now())
	return s, nil
}

// Root returns the absolute root directory.
func (s *Store) Root() string { return s.root }

func (s *Store) removeStaleTemps(now time.Time) {
	entries, err := os.ReadDir(filepath.Join(s.root, tempDirName))
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && now.Sub(info.ModTime()) > StaleTempAge {
			_ = os.Remove(filepath.Join(s.root, tempDirName, e.Name()))
		}
	}
}

// path maps a validated key to its file.
func (s *Store) path(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	if key == tempDirName || strings.HasPrefix(key, tempDirName+"/") {
		return "", fmt.Errorf("%w: %q is reserved", objstore.ErrInvalidKey, key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// notFound wraps errors that mean "no such object".
func notFound(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%w: %s: %v", objstore.ErrNotFound, key, err)
	}
	return fmt.Errorf("file: %s: %w", key, err)
}

// ReadRange implements objstore.ObjectStore.
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, notFound(key, err)
	}
	info, err := f.Stat()
	if err == nil && info.IsDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		f.Close()
		return nil, notFound(key, err)
	}
	if err := objstore.CheckRange(offset, length, info.Size()); err != nil {
		f.Close()
		return nil, err
	}
	return &fileRange{SectionReader: io.NewSectionReader(f, offset, length), file: f}, nil
}

type fileRange struct {
	*io.SectionReader
	file *os.File
}

func (r *fileRange) Close() error { return r.file.Close() }

// Put implements objstore.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: negative size %d", objstore.ErrShortBody, size)
	}
	tmp, err := s.writeTemp(ctx, body, size)
	if err != nil {
		return err
	}
	if err := s.install(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp copies exactly size bytes of body into a synced temp file.
func (s *Store) writeTemp(ctx context.Context, body io.Reader, size int64) (string, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, tempDirName), "put-*")
	if err != nil {
		return "", fmt.Errorf("file: %w", err)
	}
	name := f.Name()
	err = copyExactly(ctx, f, body, size)
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("file: %w", closeErr)
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// copyExactly copies size bytes, failing with ErrShortBody on a size mismatch.
func copyExactly(ctx context.Context, dst io.Writer, body io.Reader, size int64) error {
	n, err := io.Copy(dst, &ctxReader{ctx: ctx, r: io.LimitReader(body, size+1)})
	if err != nil {
		return fmt.Errorf("file: writing object: %w", err)
	}
	if n != size {
		return fmt.Errorf("%w: got %d bytes, want %d", objstore.ErrShortBody, n, size)
	}
	return nil
}

// ctxReader stops a long copy when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// install renames tmp to dst and syncs dst's directory. A concurrent Delete
// may remove the freshly made directory before the rename; one retry covers it.
func (s *Store) install(tmp, dst string) error {
	dir := filepath.Dir(dst)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			continue
		}
		if err = os.Rename(tmp, dst); err == nil {
			return syncDir(dir)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return fmt.Errorf("file: installing object: %w", err)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("file: syncing %s: %w", dir, err)
	}
	return nil
}

// List implements objstore.ObjectStore.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	var out []objstore.ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		return s.visit(ctx, prefix, p, d, err, &out)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("file: list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *Store) visit(ctx context.Context, prefix, p string, d fs.DirEntry, err error, out *[]objstore.ObjectInfo) error {
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, relErr := filepath.Rel(s.root, p)
	if relErr != nil {
		return relErr
	}
	key := filepath.ToSlash(rel)
	if d.IsDir() {
		if key == tempDirName {
			return filepath.SkipDir
		}
		return nil
	}
	if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
		return nil
	}
	info, err := d.Info()
	if err != nil {
		return nil // deleted while walking
	}
	*out = append(*out, objstore.ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()})
	return nil
}

// Delete implements objstore.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("file: delete %s: %w", key, err)
	}
	s.removeEmptyParents(filepath.Dir(p))
	return nil
}

// removeEmptyParents removes dir and its parents up to (not including) the
// root while they are empty. Failures are harmless: a directory that is not
// empty, or that a concurrent Put just filled, stays.
func (s *Store) removeEmptyParents(dir string) {
	for dir != s.root && strings.HasPrefix(dir, s.root+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// Stat implements objstore.ObjectStore.
func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return objstore.ObjectInfo{}, err
	}
	p, err := s.path(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	info, err := os.Stat(p)
	if err == nil && !info.Mode().IsRegular() {
		err = syscall.EISDIR
	}
	if err != nil {
		return objstore.ObjectInfo{}, notFound(key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()}, nil
}

// IsNotFound implements objstore.ObjectStore.
func (s *Store) IsNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }
