package tier

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// probeCleanupTimeout bounds the delete of a probe whose checks failed.
const probeCleanupTimeout = 5 * time.Second

// probeElement is the key element under <cluster> of probe objects.
// Nothing lists it: topics live under topicsElement.
const probeElement = "probe"

// ProbeBucket checks that the store takes writes and serves them back
// under the cluster's prefix: PUT, HEAD, GET and DELETE of a small object
// at <cluster>/probe/<node>-<random>. Its error names the step that failed
// and the store's reason (credentials, permissions, a missing bucket, an
// unreachable endpoint). The caller bounds it with ctx; pass the bare
// backend, not a retrying store, so that a broken store fails fast.
func ProbeBucket(ctx context.Context, store ObjectStore, cluster string, node int32) error {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	key := fmt.Sprintf("%s/%s/%d-%s", cluster, probeElement, node, hex.EncodeToString(nonce[:]))
	body := []byte("strata bucket probe " + key)
	if err := store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("bucket probe: write: %w", err)
	}
	deleted := false
	defer func() { // even when a check below fails: the probe leaves nothing
		if !deleted {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeCleanupTimeout)
			defer cancel()
			_ = store.Delete(cleanup, key)
		}
	}()
	info, err := store.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("bucket probe: stat: %w", err)
	}
	if info.Size != int64(len(body)) {
		return fmt.Errorf("bucket probe: %s has %d bytes, %d were written", key, info.Size, len(body))
	}
	r, err := store.ReadRange(ctx, key, 0, int64(len(body)))
	if err != nil {
		return fmt.Errorf("bucket probe: read: %w", err)
	}
	got, err := io.ReadAll(io.LimitReader(r, int64(len(body))+1))
	_ = r.Close()
	if err != nil {
		return fmt.Errorf("bucket probe: read: %w", err)
	}
	if !bytes.Equal(got, body) {
		return fmt.Errorf("bucket probe: %s read back different bytes", key)
	}
	if err := store.Delete(ctx, key); err != nil {
		return fmt.Errorf("bucket probe: delete: %w", err)
	}
	deleted = true
	return nil
}
