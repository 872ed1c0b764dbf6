package compaction

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// putObject uploads log as one tier object with aborted as its aborted
// transactions and returns its manifest entry.
func putObject(t *testing.T, store tier.ObjectStore, log []byte, aborted []hotlog.AbortedTxn) metadata.TierEntry {
	t.Helper()
	meta := tier.SegmentMeta{Topic: "keyed", TopicID: metadata.TopicID{7}, Partition: 0, UploadEpoch: 1, AbortedTxns: aborted}
	obj, err := tier.EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), meta)
	if err != nil {
		t.Fatal(err)
	}
	ft := obj.Footer()
	key, err := tier.SegmentKey(tier.SegmentKeyParts{Cluster: "c1", Topic: meta.Topic, TopicID: meta.TopicID,
		BaseOffset: ft.BaseOffset, Epoch: meta.UploadEpoch})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), key, obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	return metadata.TierEntry{TopicID: meta.TopicID, BaseOffset: ft.BaseOffset, LastOffset: ft.LastOffset,
		MaxTimestamp: ft.MaxTimestamp, Key: key, Size: obj.Size(), Version: 1}
}

// A BucketStore reads an object's batches and its aborted transactions
// from a real object store, through a real cold reader.
func TestBucketStoreReadsObjects(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemStore()
	log := concat(
		buildBatch(t, testBatch{base: 0, records: keyed("a", "1", "b", "2")}),
		buildBatch(t, testBatch{base: 2, producerID: 9, txn: true, records: keyed("c", "3")}),
		buildBatch(t, testBatch{base: 3, producerID: 9, control: true}),
	)
	aborted := []hotlog.AbortedTxn{{ProducerID: 9, FirstOffset: 2, LastOffset: 3, LastStableOffset: 2}}
	e := putObject(t, mem, log, aborted)
	cold, err := tier.NewColdReader(mem, tier.ColdConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	s := BucketStore{Objects: mem, Cold: cold}

	got, err := s.AbortedTxns(ctx, e)
	if err != nil || !slices.Equal(got, aborted) {
		t.Fatalf("aborted %+v, %v; want %+v", got, err, aborted)
	}
	got[0].ProducerID = 1 // the caller's copy: the cached index must not change
	if again, _ := s.AbortedTxns(ctx, e); !slices.Equal(again, aborted) {
		t.Fatalf("the cached index changed through a returned slice: %+v", again)
	}

	src := s.ObjectBatches(ctx, []metadata.TierEntry{e})
	defer src.Close()
	var read []byte
	for {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, b...)
	}
	if !bytes.Equal(read, log) {
		t.Fatalf("read %d bytes of batches, want the %d uploaded", len(read), len(log))
	}
	s.DeleteReplaced(ctx) // without a compactor nothing was replaced
	if _, err := mem.Stat(ctx, e.Key); err != nil {
		t.Fatalf("object gone without a compactor: %v", err)
	}
}
