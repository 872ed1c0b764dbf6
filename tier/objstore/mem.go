package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemStore is an in-memory ObjectStore for tests and tools. Objects are
// copied in and out, so callers can reuse their buffers.
type MemStore struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		objects map[string]memObject // guarded by mu
	}
}

type memObject struct {
	data    []byte
	modTime time.Time
}

var _ ObjectStore = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	m := &MemStore{now: time.Now}
	m.mu.objects = make(map[string]memObject)
	return m
}

// ReadRange implements ObjectStore.
func (m *MemStore) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkCall(ctx, key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	obj, ok := m.mu.objects[key]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err := CheckRange(offset, length, int64(len(obj.data))); err != nil {
		return nil, err
	}
	// obj.data is never mutated after Put, so sharing the slice is safe.
	return io.NopCloser(bytes.NewReader(obj.data[offset : offset+length])), nil
}

// Put implements ObjectStore.
func (m *MemStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := checkCall(ctx, key); err != nil {
		return err
	}
	data, err := readBody(body, size)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.mu.objects[key] = memObject{data: data, modTime: m.now()}
	m.mu.Unlock()
	return nil
}

// List implements ObjectStore.
func (m *MemStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []ObjectInfo
	for key, obj := range m.mu.objects {
		if strings.HasPrefix(key, prefix) {
			out = append(out, ObjectInfo{Key: key, Size: int64(len(obj.data)), ModTime: obj.modTime})
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements ObjectStore.
func (m *MemStore) Delete(ctx context.Context, key string) error {
	if err := checkCall(ctx, key); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.mu.objects, key)
	m.mu.Unlock()
	return nil
}

// Stat implements ObjectStore.
func (m *MemStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkCall(ctx, key); err != nil {
		return ObjectInfo{}, err
	}
	m.mu.Lock()
	obj, ok := m.mu.objects[key]
	m.mu.Unlock()
	if !ok {
		return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return ObjectInfo{Key: key, Size: int64(len(obj.data)), ModTime: obj.modTime}, nil
}

// IsNotFound implements ObjectStore.
func (m *MemStore) IsNotFound(err error) bool { return isNotFoundSentinel(err) }

// Corrupt flips the bits of mask in byte at of key: tests use it to check
// that CRCs catch damage. It reports whether the byte existed.
func (m *MemStore) Corrupt(key string, at int64, mask byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	obj, ok := m.mu.objects[key]
	if !ok || at < 0 || at >= int64(len(obj.data)) {
		return false
	}
	data := bytes.Clone(obj.data) // readers may hold the old slice
	data[at] ^= mask
	m.mu.objects[key] = memObject{data: data, modTime: obj.modTime}
	return true
}

// checkCall is the common prologue of single-key operations.
func checkCall(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ValidateKey(key)
}

// readBody reads exactly size bytes of body into memory.
func readBody(body io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrShortBody, size)
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(body, size+1))
	if err != nil {
		return nil, fmt.Errorf("objstore: reading put body: %w", err)
	}
	if n != size {
		return nil, fmt.Errorf("%w: got %d bytes, want %d", ErrShortBody, n, size)
	}
	return buf.Bytes(), nil
}

// isNotFoundSentinel is IsNotFound for stores whose errors wrap ErrNotFound.
func isNotFoundSentinel(err error) bool { return errors.Is(err, ErrNotFound) }
