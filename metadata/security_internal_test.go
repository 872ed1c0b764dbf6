package metadata

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// After etcd compacted the history a security watch needs, the watcher
// signals (consumers reload everything) and keeps watching from now.
func TestWatchSecurityResyncAfterCompaction(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := StartEmbedded(EmbeddedConfig{Dir: filepath.Join(t.TempDir(), "etcd"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Open(ctx, Config{Endpoints: e.Endpoints(), Cluster: "resync", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if err := s.AlterQuotas(ctx, QuotaEntity{User: "u"}, map[string]float64{"a": 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	current, err := s.currentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Compact(ctx, current); err != nil {
		t.Fatal(err)
	}
	out := make(chan struct{}, 1)
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchSignal(watchCtx, s.keys.aclRoot(), 2, out) // revision 2 is compacted away
	}()
	waitSignal(t, out, "resync")
	// The watch continues after the resync: it learned the revision to
	// resume from before signalling, so a change made now is seen.
	if _, err := s.client.Put(ctx, s.keys.aclRoot()+"x", "{}"); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, out, "change after resync")
	stop()
	<-done
}

func waitSignal(t *testing.T, out <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-out:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no signal", what)
	}
}
