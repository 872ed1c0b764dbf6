package tier

import (
	"context"
	"errors"
	"testing"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier/objstore"
)

// A producer snapshot is read only from an object ending exactly at the
// offset asked; without tiering, or without such an object, there is none.
func TestProducerSnapshotNeedsAnObjectEndingThere(t *testing.T) {
	ctx := context.Background()
	k := metadata.TierPartition{TopicID: metadata.TopicID{1}, Partition: 0}
	off := ColdSource{Manifest: NewManifest()}
	if _, err := off.ProducerSnapshot(ctx, k, 10); !errors.Is(err, ErrNoProducerSnapshot) {
		t.Fatalf("tiering off: %v", err)
	}
	cold, err := NewColdReader(objstore.NewMemStore(), ColdConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	on := ColdSource{Reader: cold, Manifest: NewManifest()}
	if _, err := on.ProducerSnapshot(ctx, k, 10); !errors.Is(err, ErrNoProducerSnapshot) {
		t.Fatalf("nothing tiered: %v", err)
	}
}
