package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors. Backends wrap them with %w.
var (
	// ErrNotFound: the key does not exist. Use store.IsNotFound(err), which
	// also recognises the backend's own not-found errors.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrInvalidKey: the key breaks the rules of doc.go (empty element, "..", ...).
	ErrInvalidKey = errors.New("objstore: invalid object key")
	// ErrInvalidRange: a negative offset or length, or a range past the end.
	ErrInvalidRange = errors.New("objstore: invalid byte range")
	// ErrTransient marks an error worth retrying (see IsTransient).
	ErrTransient = errors.New("objstore: transient object-store error")
	// ErrShortBody: a Put body delivered fewer or more bytes than its size.
	ErrShortBody = errors.New("objstore: put body does not match its size")
)

// MaxKeyLen bounds key length (S3's limit is 1024 bytes).
const MaxKeyLen = 1024

// ObjectStore is the whole of what Strata needs from S3, MinIO or a directory.
// Implementations are safe for concurrent use.
type ObjectStore interface {
	// ReadRange returns length bytes of key starting at offset. The range
	// must lie within the object (ErrInvalidRange otherwise); length 0 is
	// allowed. The caller closes the reader. A reader that ends before
	// length bytes returns io.ErrUnexpectedEOF.
	ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Put writes body (exactly size bytes, ErrShortBody otherwise) to key,
	// atomically: readers never see a partial object. If body implements
	// io.ReaderAt, backends may read parts of it in parallel (multipart
	// upload) and retries may re-read it; if it implements io.Seeker, retries
	// rewind it to the offset it had when Put was called.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// List returns every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Stat returns the object's size and modification time.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// IsNotFound reports whether err says the key does not exist.
	IsNotFound(err error) bool
}

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// ValidateKey checks the key rules of doc.go. Every backend calls it first.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d", ErrInvalidKey, len(key))
	}
	if strings.ContainsRune(key, 0) || strings.ContainsRune(key, '\\') {
		return fmt.Errorf("%w: %q contains NUL or backslash", ErrInvalidKey, key)
	}
	for _, element := range strings.Split(key, "/") {
		if element == "" || element == "." || element == ".." {
			return fmt.Errorf("%w: %q has an empty, '.' or '..' element", ErrInvalidKey, key)
		}
	}
	return nil
}

// ValidatePrefix checks a List prefix: empty, or a key prefix that would be
// valid if completed (it may end in '/').
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidateKey(strings.TrimSuffix(prefix, "/") + "/x")
}

// CheckRange validates a ReadRange request against an object of size bytes.
func CheckRange(offset, length, size int64) error {
	if offset < 0 || length < 0 || offset > size || length > size-offset {
		return fmt.Errorf("%w: [%d, +%d) of a %d-byte object", ErrInvalidRange, offset, length, size)
	}
	return nil
}

// IsTransient reports whether err is worth retrying: see doc.go. Backends
// classify their own errors and wrap ErrTransient; this also catches network
// timeouts and unexpected EOFs from any layer.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrTransient) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return true
	}
	// A per-attempt deadline (not the caller's) also surfaces as DeadlineExceeded;
	// Retrying checks the caller's context separately before retrying.
	return errors.Is(err, context.DeadlineExceeded)
}

// countingReader counts bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ReadAll reads a whole range into memory, checking its length.
func ReadAll(ctx context.Context, store ObjectStore, key string, offset, length int64) ([]byte, error) {
	buf := make([]byte, length)
	if err := ReadInto(ctx, store, key, offset, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadInto fills buf with the range of key starting at offset, checking
// its length.
func ReadInto(ctx context.Context, store ObjectStore, key string, offset int64, buf []byte) error {
	rc, err := store.ReadRange(ctx, key, offset, int64(len(buf)))
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("objstore: read %s [%d, +%d): %w", key, offset, len(buf), err)
	}
	return nil
}
