package objstore

import (
	"context"
	"io"
	"strings"
	"sync"
)

// Op names an object-store operation, as counted and as matched by faults.
type Op string

// Operations. OpGet is ReadRange (S3 GET with a Range), OpStat is HEAD.
const (
	OpAny    Op = ""
	OpGet    Op = "GET"
	OpPut    Op = "PUT"
	OpList   Op = "LIST"
	OpDelete Op = "DELETE"
	OpStat   Op = "HEAD"
)

// CountKey is what Counting counts by: operation and topic ("" when the key
// or prefix is not under a topic, e.g. a cluster-wide List).
type CountKey struct {
	Op    Op
	Topic string
}

// OpCounts are the counters of one CountKey.
type OpCounts struct {
	Requests int64 // calls made, successful or not
	Errors   int64 // calls that returned an error (for GET: opening, or reading the body)
	Bytes    int64 // body bytes moved (GET: read by the caller; PUT: object size on success)
}

// Counting is an ObjectStore that counts requests, errors and bytes per
// operation and topic of the one it wraps (DESIGN.md §5 cost visibility).
type Counting struct {
	inner ObjectStore

	mu struct {
		sync.Mutex
		counts map[CountKey]OpCounts // guarded by mu
	}
}

var _ ObjectStore = (*Counting)(nil)

// NewCounting wraps inner.
func NewCounting(inner ObjectStore) *Counting {
	c := &Counting{inner: inner}
	c.mu.counts = make(map[CountKey]OpCounts)
	return c
}

// Snapshot returns a copy of the counters.
func (c *Counting) Snapshot() map[CountKey]OpCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[CountKey]OpCounts, len(c.mu.counts))
	for k, v := range c.mu.counts {
		out[k] = v
	}
	return out
}

// Total sums the counters of op over all topics.
func (c *Counting) Total(op Op) OpCounts {
	var total OpCounts
	for k, v := range c.Snapshot() {
		if k.Op == op {
			total.Requests += v.Requests
			total.Errors += v.Errors
			total.Bytes += v.Bytes
		}
	}
	return total
}

func (c *Counting) add(op Op, key string, requests int64, err error, bytes int64) {
	k := CountKey{Op: op, Topic: TopicOfKey(key)}
	c.mu.Lock()
	v := c.mu.counts[k]
	v.Requests += requests
	if err != nil {
		v.Errors++
	}
	v.Bytes += bytes
	c.mu.counts[k] = v
	c.mu.Unlock()
}

// TopicOfKey returns the topic name of a key or prefix laid out as in
// tier/doc.go (".../topics/<topic>-<topicId>/..."), or "" if it has none.
// A topic id is 22 characters, so the name is what precedes the last
// 23 characters of that element.
func TopicOfKey(key string) string {
	i := strings.Index(key, "topics/")
	if i < 0 || (i > 0 && key[i-1] != '/') {
		return ""
	}
	element := key[i+len("topics/"):]
	if j := strings.IndexByte(element, '/'); j >= 0 {
		element = element[:j]
	}
	const idSuffix = 1 + 22 // "-" + topic id
	if len(element) <= idSuffix || element[len(element)-idSuffix] != '-' {
		return ""
	}
	return element[:len(element)-idSuffix]
}

// ReadRange implements ObjectStore.
func (c *Counting) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	body, err := c.inner.ReadRange(ctx, key, offset, length)
	if err != nil {
		c.add(OpGet, key, 1, err, 0)
		return nil, err
	}
	c.add(OpGet, key, 1, nil, 0)
	return &countedBody{ReadCloser: body, owner: c, key: key}, nil
}

// countedBody adds the bytes the caller reads to the GET counters.
type countedBody struct {
	io.ReadCloser
	owner *Counting
	key   string
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var failed error
	if err != nil && err != io.EOF {
		failed = err
	}
	if n > 0 || failed != nil {
		b.owner.add(OpGet, b.key, 0, failed, int64(n))
	}
	return n, err
}

// Put implements ObjectStore.
func (c *Counting) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	err := c.inner.Put(ctx, key, body, size)
	var bytes int64
	if err == nil {
		bytes = size
	}
	c.add(OpPut, key, 1, err, bytes)
	return err
}

// List implements ObjectStore.
func (c *Counting) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	out, err := c.inner.List(ctx, prefix)
	c.add(OpList, prefix, 1, err, 0)
	return out, err
}

// Delete implements ObjectStore.
func (c *Counting) Delete(ctx context.Context, key string) error {
	err := c.inner.Delete(ctx, key)
	c.add(OpDelete, key, 1, err, 0)
	return err
}

// Stat implements ObjectStore.
func (c *Counting) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	info, err := c.inner.Stat(ctx, key)
	c.add(OpStat, key, 1, err, 0)
	return info, err
}

// IsNotFound implements ObjectStore.
func (c *Counting) IsNotFound(err error) bool { return c.inner.IsNotFound(err) }
