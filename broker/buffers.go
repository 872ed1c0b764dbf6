package broker

import (
	"sync"

	"github.com/strata-log/strata/bufpool"
)

// Large buffers of the fetch path come from bufpool (see its package doc
// for why they are reused) and have one owner at a time. A response
// frame's ownership is described in broker/wire (buffers.go). A hot
// segment read (hotlog.Log.ReadPooled) belongs to the request's
// pooledReads until the response is encoded into its frame (a copy):
// conn.serve releases them then. Cold reads (the cold cache's blocks) are
// never pooled here.

// pooledReads collects the pooled buffers one request's reads returned.
// Reads may add from several goroutines; release runs once, after the
// response is encoded. A nil *pooledReads adds nothing (reads then are not
// pooled).
type pooledReads struct {
	mu   sync.Mutex
	bufs [][]byte
}

func (r *pooledReads) add(b []byte) {
	if r == nil || b == nil {
		return
	}
	r.mu.Lock()
	r.bufs = append(r.bufs, b)
	r.mu.Unlock()
}

// release returns every collected buffer; nothing may read them after.
func (r *pooledReads) release() {
	if r == nil {
		return
	}
	r.mu.Lock()
	bufs := r.bufs
	r.bufs = nil
	r.mu.Unlock()
	for _, b := range bufs {
		bufpool.Put(b)
	}
}
