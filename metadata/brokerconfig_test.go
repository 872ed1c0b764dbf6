package metadata_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// Dynamic broker configs: concurrent edits through two stores never lose
// one (CAS), an emptied record is deleted, a bad resource is refused, and
// the watch signals changes.
func TestBrokerConfigs(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	a, b := openStore(t, endpoints, "bc"), openStore(t, endpoints, "bc")
	ctx := testCtx(t)
	changes := b.WatchBrokerConfigs(ctx)

	var wg sync.WaitGroup
	for _, s := range []*metadata.Store{a, b, a, b} {
		wg.Go(func() {
			for range 10 {
				err := s.AlterBrokerConfigs(ctx, "", func(m map[string]string) error {
					n, _ := strconv.Atoi(m["count"])
					m["count"] = strconv.Itoa(n + 1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := a.AlterBrokerConfigs(ctx, "7", func(m map[string]string) error { m["max.connections"] = "9"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Default["count"] != "40" || got.PerBroker[7]["max.connections"] != "9" {
		t.Fatalf("loaded %+v, want count=40 and broker 7's max.connections=9", got)
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled by the watch")
	}

	boom := errors.New("boom")
	if err := a.AlterBrokerConfigs(ctx, "", func(map[string]string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("mutate's error: %v", err)
	}
	if err := a.AlterBrokerConfigs(ctx, "x", func(map[string]string) error { return nil }); !errors.Is(err, metadata.ErrInvalidConfig) {
		t.Fatalf("resource x: %v, want ErrInvalidConfig", err)
	}
	if err := a.AlterBrokerConfigs(ctx, "7", func(m map[string]string) error { clear(m); return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.LoadBrokerConfigs(ctx); len(got.PerBroker) != 0 {
		t.Fatalf("an emptied record is still there: %+v", got.PerBroker)
	}
}
