package tier

// Copying an object into another incarnation of its topic (`strata restore
// --as-of` restores into a new topic id, so that the bucket's history after
// the restore point stays intact and each incarnation's directory alone
// describes it: see "Restore" in doc.go).

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/strata-log/strata/metadata"
)

// CopyObjectAs copies object o of topic t into incarnation newID: the same
// batches (each CRC-checked on the way), producer snapshot, aborted
// transactions and upload epoch, a footer naming newID, under a fresh key
// of newID's directory with o's key base. The batches are spooled to a
// temporary file, not held in memory. The copy is verified after its PUT.
// Returns the copy's manifest entry (TopicID newID).
func CopyObjectAs(ctx context.Context, store ObjectStore, t *ReplayTopic, o ReplayObject, newID metadata.TopicID) (metadata.TierEntry, error) {
	f := o.Footer
	meta, err := readMetaSections(ctx, store, o)
	if err != nil {
		return metadata.TierEntry{}, err
	}
	spool, err := spoolBatches(ctx, store, o)
	if err != nil {
		return metadata.TierEntry{}, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	length := f.Sections[SectionBatches].Length
	obj, err := EncodeSegmentObject(spool, length, SegmentMeta{Topic: t.Topic, TopicID: newID, Partition: f.Partition,
		UploadEpoch: f.UploadEpoch, ProducerSnapshot: meta.ProducerSnapshot, AbortedTxns: meta.Aborted})
	if err != nil {
		return metadata.TierEntry{}, fmt.Errorf("tier: copying %s: %w", o.Key, err)
	}
	key, err := SegmentKey(SegmentKeyParts{Cluster: t.Cluster, Topic: t.Topic, TopicID: newID, Partition: f.Partition,
		BaseOffset: o.KeyBase, Epoch: f.UploadEpoch})
	if err != nil {
		return metadata.TierEntry{}, err
	}
	if err := store.Put(ctx, key, obj.NewReader(), obj.Size()); err != nil {
		return metadata.TierEntry{}, fmt.Errorf("tier: put %s: %w", key, err)
	}
	if err := Verify(ctx, store, key, obj.Footer(), false); err != nil {
		return metadata.TierEntry{}, fmt.Errorf("tier: verify %s: %w", key, err)
	}
	nf := obj.Footer()
	return metadata.TierEntry{TopicID: newID, Partition: f.Partition, BaseOffset: o.KeyBase, LastOffset: nf.LastOffset,
		FirstTimestamp: nf.FirstTimestamp, MaxTimestamp: nf.MaxTimestamp, LeaderEpoch: lastEpoch(obj.Index),
		Key: key, Size: obj.Size()}, nil
}

// readMetaSections reads and checks the index sections of o.
func readMetaSections(ctx context.Context, store ObjectStore, o ReplayObject) (*ObjectIndex, error) {
	off, n := o.Footer.MetaRange()
	if n > MaxIndexSectionBytes*8 {
		return nil, corruptf("%s: index sections of %d bytes", o.Key, n)
	}
	b, err := readAllRange(ctx, store, o.Key, off, n)
	if err != nil {
		return nil, err
	}
	x, err := DecodeIndexSections(o.Footer, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	return x, nil
}

// spoolBatches copies o's batches section to a temporary file.
func spoolBatches(ctx context.Context, store ObjectStore, o ReplayObject) (*os.File, error) {
	sec := o.Footer.Sections[SectionBatches]
	body, err := store.ReadRange(ctx, o.Key, sec.Offset, sec.Length)
	if err != nil {
		return nil, fmt.Errorf("tier: reading %s: %w", o.Key, err)
	}
	defer body.Close()
	f, err := os.CreateTemp("", "strata-restore-*.batches")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, io.LimitReader(body, sec.Length)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("tier: reading %s: %w", o.Key, err)
	}
	return f, nil
}

func readAllRange(ctx context.Context, store ObjectStore, key string, off, n int64) ([]byte, error) {
	body, err := store.ReadRange(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("tier: reading %s: %w", key, err)
	}
	defer body.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, fmt.Errorf("tier: reading %s: %w", key, err)
	}
	return b, nil
}

// lastEpoch is the leader epoch of the object's last batch (the manifest
// entry's LeaderEpoch), or the upload epoch if the object lists none.
func lastEpoch(x *ObjectIndex) int32 {
	if len(x.Epochs) == 0 {
		return x.Footer.UploadEpoch
	}
	return x.Epochs[len(x.Epochs)-1].Epoch
}

// restoreCopyWorkers bounds the objects copied at once.
const restoreCopyWorkers = 4

// AdoptPlanObjects makes plan's entries self-contained in incarnation
// newID: every entry whose object lies in another incarnation's directory
// (t's objects) is replaced by a copy under newID (CopyObjectAs), a few
// at a time. Entries already under newID (a tail object) stay. copied is
// called with each copy's size, from the copying goroutines.
func AdoptPlanObjects(ctx context.Context, store ObjectStore, t *ReplayTopic, plan RestorePartition,
	newID metadata.TopicID, copied func(bytes int64)) (RestorePartition, error) {
	byKey := map[string]ReplayObject{}
	for _, o := range t.Partitions[plan.Partition] {
		byKey[o.Key] = o
	}
	out := plan
	out.Entries = append([]metadata.TierEntry(nil), plan.Entries...)
	errs := make([]error, len(out.Entries))
	sem := make(chan struct{}, restoreCopyWorkers)
	done := make(chan struct{})
	pending := 0
	for i, e := range out.Entries {
		o, ok := byKey[e.Key]
		if !ok {
			continue // written for newID by the plan itself
		}
		pending++
		go func() {
			sem <- struct{}{}
			defer func() { <-sem; done <- struct{}{} }()
			c, err := CopyObjectAs(ctx, store, t, o, newID)
			out.Entries[i], errs[i] = c, err
			if err == nil && copied != nil {
				copied(c.Size)
			}
		}()
	}
	for range pending {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return plan, err
		}
	}
	return out, nil
}
