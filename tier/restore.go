package tier

// `strata restore` (DESIGN.md §8, §10): plan each partition's manifest
// entries from the bucket alone, cutting at a point in time when asked.
// The format decisions are in doc.go, "Restore"; this file implements them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// ErrRestore: restore options that cannot be used.
var ErrRestore = errors.New("tier: restore")

// maxRestoreSnapshotBytes keeps a tail object's producer snapshot well
// inside the object's index budget (as the uploader does).
const maxRestoreSnapshotBytes = MaxIndexSectionBytes / 2

// RestoreOptions tune RestorePartitionPlan.
type RestoreOptions struct {
	// AsOf, if set, restores only the records before the first one (in
	// offset order) whose timestamp is after it; nil restores everything.
	AsOf *time.Time
	// NewTopicID is the restored topic's id: required, and different from
	// the bucket's, when AsOf is set (a new incarnation); without AsOf it
	// may be zero (the bucket's id is kept). Entries carry it, and the
	// tail object is written under its directory.
	NewTopicID metadata.TopicID
	// MaxBatchBytes bounds the decompressed records of the batch a cut
	// re-encodes. Default 256 MiB.
	MaxBatchBytes int
	// TempDir holds the tail object while it is assembled. Default os.TempDir().
	TempDir string
}

// RestorePartition is the plan of one partition.
type RestorePartition struct {
	Partition int32
	// Entries are the manifest entries, TopicID and Partition set to the
	// restored topic id, ascending BaseOffset: objects of the bucket (keys
	// under the old topic id's directory) and the tail object, if any.
	Entries  []metadata.TierEntry
	LogStart int64 // first offset restored (0 if the partition has no objects)
	End      int64 // next offset after the restored range (= hot log start of the new leader)
	// MaxEpoch is the largest leader epoch (batch or upload epoch) of the
	// bucket objects restored, -1 if none. The restore epoch is MaxEpoch+1:
	// the tail object's upload epoch and its ABORT markers' leader epoch.
	MaxEpoch    int32
	Cut         bool  // the cut lies inside an object: a tail object holds its records before the cut
	AbortedOpen int   // transactions open at the cut that got an ABORT marker (offsets CutOffset..End-1)
	Dropped     int64 // offsets of the bucket at or after CutOffset not restored (records, markers, compacted gaps)
	// Added to the contract:
	CutOffset int64      // E: first offset of the bucket not restored (BucketEnd without AsOf)
	BucketEnd int64      // one past the last offset any object of the partition claims
	Gaps      [][2]int64 // [from, to] ranges inside [LogStart, CutOffset) no object claims
	TailKey   string     // the object this restore wrote ("" if none)
	// StateGuessed: no producer snapshot was found before the object scanned
	// for the producer state at the cut, so a transaction that began before
	// that object and wrote nothing in it was not seen (not aborted).
	StateGuessed bool
	// MaxProducerID is the largest producer id in the producer state at the
	// restored end (-1 if none): the restored cluster must allocate larger
	// ids, or a new producer would inherit a restored one's sequences.
	MaxProducerID int64
	// BucketEndTime is the max timestamp of the object serving BucketEnd-1
	// (ReplayExtent.LastTime): where the bucket ends, in time.
	BucketEndTime int64
}

// restoreRun is one RestorePartitionPlan call. Owned by its goroutine.
type restoreRun struct {
	ctx       context.Context
	store     ObjectStore
	t         *ReplayTopic
	partition int32
	opts      RestoreOptions
	id        metadata.TopicID // the restored topic id
	all       []ReplayObject   // every object of the partition
	pieces    []ReplayPiece
	readers   map[string]*ObjectReader
}

// RestorePartitionPlan plans one partition from its listed objects
// (FindReplayTopic's ReplayTopic.Partitions[partition]) and, when the cut
// needs one, writes and verifies the tail object to store (under
// cluster/topic/restored id). Damaged objects give ErrCorruptObject.
func RestorePartitionPlan(ctx context.Context, store ObjectStore, t *ReplayTopic, partition int32,
	opts RestoreOptions) (RestorePartition, error) {
	res := RestorePartition{Partition: partition, MaxEpoch: -1, MaxProducerID: -1}
	id, err := opts.restoredID(t)
	if err != nil {
		return res, err
	}
	r := &restoreRun{ctx: ctx, store: store, t: t, partition: partition, opts: opts, id: id,
		all: t.Partitions[partition], readers: map[string]*ObjectReader{}}
	for _, o := range r.all {
		if o.Footer == nil {
			return res, fmt.Errorf("%w: object %s listed without its footer", ErrRestore, o.Key)
		}
	}
	if r.pieces = PlanReplay(r.all); len(r.pieces) == 0 {
		return res, nil
	}
	last := r.pieces[len(r.pieces)-1]
	res.LogStart, res.BucketEnd, res.BucketEndTime = r.pieces[0].From, last.To+1, last.Object.Footer.MaxTimestamp
	res.CutOffset = res.BucketEnd
	if opts.AsOf != nil {
		if res.CutOffset, err = r.findCut(opts.AsOf.UnixMilli()); err != nil {
			return res, err
		}
	}
	res.Dropped = res.BucketEnd - res.CutOffset
	if res.CutOffset <= res.LogStart {
		res.LogStart, res.End = res.CutOffset, res.CutOffset
		return res, nil // every record is after the cut
	}
	res.Gaps = planGaps(r.pieces, res.CutOffset)
	return res, r.plan(&res)
}

// restoredID checks the options and returns the restored topic id.
func (o RestoreOptions) restoredID(t *ReplayTopic) (metadata.TopicID, error) {
	switch {
	case t == nil:
		return metadata.TopicID{}, fmt.Errorf("%w: no topic", ErrRestore)
	case o.MaxBatchBytes < 0:
		return metadata.TopicID{}, fmt.Errorf("%w: MaxBatchBytes %d", ErrRestore, o.MaxBatchBytes)
	case o.AsOf != nil && (o.NewTopicID.IsZero() || o.NewTopicID == t.TopicID):
		return metadata.TopicID{}, fmt.Errorf("%w: a restore as of a time needs a new topic id", ErrRestore)
	case o.NewTopicID.IsZero():
		return t.TopicID, nil
	}
	return o.NewTopicID, nil
}

// findCut returns the offset of the first record, in plan order, whose
// timestamp is after asOf (ms), or the bucket's end. A batch whose
// maxTimestamp is at most asOf is trusted to hold no later record (as the
// time indexes and ListOffsets do).
func (r *restoreRun) findCut(asOf int64) (int64, error) {
	end := r.pieces[len(r.pieces)-1].To + 1
	if asOf == math.MaxInt64 {
		return end, nil
	}
	for _, p := range r.pieces {
		if p.Object.Footer.MaxTimestamp <= asOf {
			continue
		}
		rd, err := r.reader(p.Object)
		if err != nil {
			return 0, err
		}
		at, ok, err := rd.OffsetForTimestamp(r.ctx, asOf+1, p.From)
		if err != nil {
			return 0, fmt.Errorf("tier: restore searching %s: %w", p.Object.Key, err)
		}
		if ok && at.Offset <= p.To {
			return at.Offset, nil
		}
	}
	return end, nil
}

// reader opens (once) the object's footer and index.
func (r *restoreRun) reader(o ReplayObject) (*ObjectReader, error) {
	if rd, ok := r.readers[o.Key]; ok {
		return rd, nil
	}
	rd, err := OpenObject(r.ctx, r.store, o.Key, o.Size)
	if err != nil {
		return nil, fmt.Errorf("tier: restore opening %s: %w", o.Key, err)
	}
	if *rd.Index.Footer != *o.Footer {
		return nil, corruptf("%s: footer changed since it was listed", o.Key)
	}
	r.readers[o.Key] = rd
	return rd, nil
}

// planGaps lists the offsets below cut between pieces.
func planGaps(pieces []ReplayPiece, cut int64) [][2]int64 {
	var gaps [][2]int64
	for i := 1; i < len(pieces) && pieces[i].From < cut; i++ {
		if prev := pieces[i-1].To; pieces[i].From > prev+1 {
			gaps = append(gaps, [2]int64{prev + 1, pieces[i].From - 1})
		}
	}
	return gaps
}

// restoreSelection is what the cut makes of the plan's objects.
type restoreSelection struct {
	kept   []ReplayObject // referenced as they are: a piece below the cut, wholly below it
	source *ReplayObject  // rewritten into the tail object (nil: the cut is at an object boundary)
}

// selectRestore keeps the objects with a piece below cut that end below
// it. Of those that reach past it, the one with the lowest base holds, in
// its own batches, every offset from its base to the cut (any object
// covering an offset holds the right record there): it alone is rewritten,
// and kept objects inside its range are left out as redundant.
func selectRestore(pieces []ReplayPiece, cut int64) restoreSelection {
	var sel restoreSelection
	seen := map[string]bool{}
	for _, p := range pieces {
		o := p.Object
		if p.From >= cut || seen[o.Key] {
			continue
		}
		seen[o.Key] = true
		switch {
		case o.Footer.LastOffset < cut:
			sel.kept = append(sel.kept, o)
		case o.Footer.BaseOffset < cut && (sel.source == nil || o.Footer.BaseOffset < sel.source.Footer.BaseOffset):
			sel.source = &o
		}
	}
	if sel.source != nil {
		from, _ := sel.source.Claim()
		sel.kept = slices.DeleteFunc(sel.kept, func(o ReplayObject) bool { f, _ := o.Claim(); return f >= from })
	}
	return sel
}

// plan builds the entries, and the tail object when the cut needs one.
func (r *restoreRun) plan(res *RestorePartition) error {
	sel := selectRestore(r.pieces, res.CutOffset)
	entries, maxEpoch, maxTS, err := r.keptEntries(sel.kept)
	if err != nil {
		return err
	}
	var src *ObjectReader
	if sel.source != nil {
		if src, err = r.reader(*sel.source); err != nil {
			return err
		}
		maxEpoch = max(maxEpoch, objectEpoch(src.Index.Footer, src.Index.Epochs))
		maxTS = max(maxTS, src.Index.Footer.MaxTimestamp)
	}
	res.MaxEpoch, res.Entries = maxEpoch, entries
	if r.opts.AsOf != nil {
		maxTS = r.opts.AsOf.UnixMilli()
	}
	tail, err := r.buildTail(res, sel, src, maxTS)
	if err != nil {
		return err
	}
	if tail != nil {
		res.Entries = append(res.Entries, *tail)
		res.TailKey = tail.Key
	}
	sort.Slice(res.Entries, func(i, j int) bool {
		a, b := res.Entries[i], res.Entries[j]
		return a.BaseOffset < b.BaseOffset || (a.BaseOffset == b.BaseOffset && a.LastOffset < b.LastOffset)
	})
	return nil
}

// objectEpoch is the largest epoch an object carries: its upload epoch or
// its last batch's.
func objectEpoch(f *Footer, epochs []EpochRange) int32 {
	e := f.UploadEpoch
	if n := len(epochs); n > 0 {
		e = max(e, epochs[n-1].Epoch)
	}
	return e
}

// entryEpoch is an entry's LeaderEpoch: its last batch's epoch (for
// OffsetForLeaderEpoch), as the uploader records it.
func entryEpoch(f *Footer, epochs []EpochRange) int32 {
	if n := len(epochs); n > 0 {
		return epochs[n-1].Epoch
	}
	return f.UploadEpoch
}

// keptEntries reads the leader-epoch section of each kept object (a few
// at a time) and builds its entry. It also returns the largest epoch and
// max timestamp seen (-1 and MinInt64 when there are none).
func (r *restoreRun) keptEntries(kept []ReplayObject) ([]metadata.TierEntry, int32, int64, error) {
	epochs := make([][]EpochRange, len(kept))
	errs := make([]error, len(kept))
	var wg sync.WaitGroup
	sem := make(chan struct{}, replayFooterWorkers)
	for i := range kept {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			epochs[i], errs[i] = readObjectEpochs(r.ctx, r.store, kept[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, 0, err
	}
	entries := make([]metadata.TierEntry, 0, len(kept)+1)
	maxEpoch, maxTS := int32(-1), int64(math.MinInt64)
	for i, o := range kept {
		f := o.Footer
		entries = append(entries, metadata.TierEntry{TopicID: r.id, Partition: r.partition, BaseOffset: o.KeyBase,
			LastOffset: f.LastOffset, FirstTimestamp: f.FirstTimestamp, MaxTimestamp: f.MaxTimestamp,
			LeaderEpoch: entryEpoch(f, epochs[i]), Key: o.Key, Size: o.Size})
		maxEpoch = max(maxEpoch, objectEpoch(f, epochs[i]))
		maxTS = max(maxTS, f.MaxTimestamp)
	}
	return entries, maxEpoch, maxTS, nil
}

// readSection reads one index section of a listed object and checks its CRC.
func readSection(ctx context.Context, store ObjectStore, o ReplayObject, s Section) ([]byte, error) {
	ref := o.Footer.Sections[s]
	if ref.Length == 0 {
		return nil, nil
	}
	if ref.Length > MaxIndexSectionBytes || ref.Offset < 0 || ref.Offset+ref.Length > o.Size-FooterSize {
		return nil, corruptf("%s: section %d at %d length %d", o.Key, s, ref.Offset, ref.Length)
	}
	b, err := objstore.ReadAll(ctx, store, o.Key, ref.Offset, ref.Length)
	if err != nil {
		return nil, fmt.Errorf("tier: restore reading %s: %w", o.Key, err)
	}
	if crc32c(b) != ref.CRC {
		return nil, corruptf("%s: section %d crc", o.Key, s)
	}
	return b, nil
}

// readObjectEpochs reads and checks an object's leader-epoch ranges.
func readObjectEpochs(ctx context.Context, store ObjectStore, o ReplayObject) ([]EpochRange, error) {
	b, err := readSection(ctx, store, o, SectionLeaderEpochs)
	if err != nil {
		return nil, err
	}
	if len(b)%epochEntrySize != 0 {
		return nil, corruptf("%s: leader-epoch section of %d bytes", o.Key, len(b))
	}
	x := &ObjectIndex{Footer: o.Footer, Epochs: decodeEpochs(b)}
	if err := x.checkEpochs(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	return x.Epochs, nil
}

// readObjectSnapshot reads an object's producer snapshot (nil if it has
// none), checked as of the object's end.
func readObjectSnapshot(ctx context.Context, store ObjectStore, o ReplayObject) ([]byte, error) {
	b, err := readSection(ctx, store, o, SectionProducerSnapshot)
	if err != nil || b == nil {
		return nil, err
	}
	at, err := hotlog.CheckProducerSnapshot(b)
	if err != nil || at != o.Footer.LastOffset+1 {
		return nil, corruptf("%s: producer snapshot as of %d (%v), object ends at %d", o.Key, at, err, o.Footer.LastOffset+1)
	}
	return b, nil
}

// snapshotIn returns the producer state of the first object (in plan rank)
// whose snapshot is as of an offset in [from, to]; ok is false if none.
func (r *restoreRun) snapshotIn(from, to int64) (*hotlog.ProducerTable, bool, error) {
	cands := make([]ReplayObject, 0, 2)
	for _, o := range r.all {
		if end := o.Footer.LastOffset + 1; end >= from && end <= to && o.Footer.Sections[SectionProducerSnapshot].Length > 0 {
			cands = append(cands, o)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Footer.LastOffset != cands[j].Footer.LastOffset {
			return cands[i].Footer.LastOffset > cands[j].Footer.LastOffset
		}
		return replayBetter(cands[i], cands[j])
	})
	if len(cands) == 0 {
		return nil, false, nil
	}
	b, err := readObjectSnapshot(r.ctx, r.store, cands[0])
	if err != nil {
		return nil, false, err
	}
	st, _, err := hotlog.NewProducerTable(b)
	if err != nil {
		return nil, false, corruptf("%s: producer snapshot: %v", cands[0].Key, err)
	}
	return st, true, nil
}

// baseState is the producer state at the start of o: a snapshot as of an
// offset between o's claim start and first batch, else empty (guessed).
func (r *restoreRun) baseState(o ReplayObject) (*hotlog.ProducerTable, bool, error) {
	from, _ := o.Claim()
	st, ok, err := r.snapshotIn(from, o.Footer.BaseOffset)
	if err != nil || ok {
		return st, false, err
	}
	st, _, err = hotlog.NewProducerTable(nil)
	return st, from > 0, err
}

// buildTail finds the producer state at the cut and writes the tail object
// when the cut is inside an object or transactions are open there. It
// returns the tail's entry, nil if none was needed.
func (r *restoreRun) buildTail(res *RestorePartition, sel restoreSelection, src *ObjectReader,
	markerTS int64) (*metadata.TierEntry, error) {
	cut := res.CutOffset
	w := &tailWriter{dir: r.opts.TempDir}
	defer w.close()
	state, aborted, err := r.stateAtCut(res, sel, src, w)
	if err != nil {
		return nil, err
	}
	res.MaxProducerID = state.MaxProducerID()
	opens := state.OpenTxns()
	restoreEpoch := res.MaxEpoch + 1
	for i, txn := range opens {
		a, err := appendAbortMarker(w, state, txn, cut+int64(i), restoreEpoch, markerTS)
		if err != nil {
			return nil, err
		}
		aborted = append(aborted, a)
	}
	res.AbortedOpen, res.End = len(opens), cut+int64(len(opens))
	if w.size == 0 {
		return nil, nil
	}
	keyBase := cut
	if sel.source != nil {
		keyBase, _ = sel.source.Claim()
	}
	return r.putTail(w, state, keyBase, res.End, restoreEpoch, aborted)
}

// stateAtCut returns the producer state at the cut and, when an object is
// cut, writes its batches below the cut to w and returns its aborts there.
func (r *restoreRun) stateAtCut(res *RestorePartition, sel restoreSelection, src *ObjectReader,
	w *tailWriter) (*hotlog.ProducerTable, []hotlog.AbortedTxn, error) {
	if sel.source == nil {
		state, guessed, err := r.stateAtBoundary(sel.kept, res.CutOffset)
		res.StateGuessed = guessed
		return state, nil, err
	}
	state, guessed, err := r.baseState(*sel.source)
	if err != nil {
		return nil, nil, err
	}
	if err := r.scanBatches(src, res.CutOffset, state, w); err != nil {
		return nil, nil, err
	}
	res.Cut, res.StateGuessed = true, guessed
	return state, abortedBelow(src.Index.Aborted, res.CutOffset), nil
}

// stateAtBoundary is the producer state at cut when no object is cut: the
// snapshot of an object ending there, else the object ending there
// scanned from its own start's snapshot.
func (r *restoreRun) stateAtBoundary(kept []ReplayObject, cut int64) (*hotlog.ProducerTable, bool, error) {
	st, ok, err := r.snapshotIn(cut, cut)
	if err != nil || ok {
		return st, false, err
	}
	var last *ReplayObject
	for i := range kept {
		if kept[i].Footer.LastOffset+1 == cut && (last == nil || replayBetter(kept[i], *last)) {
			last = &kept[i]
		}
	}
	if last == nil {
		// The piece before the cut is a compacted object's claim past its
		// last batch; nothing in the plan ends at the cut.
		st, _, err := hotlog.NewProducerTable(nil)
		return st, true, err
	}
	st, guessed, err := r.baseState(*last)
	if err != nil {
		return nil, false, err
	}
	rd, err := r.reader(*last)
	if err != nil {
		return nil, false, err
	}
	return st, guessed, r.scanBatches(rd, cut, st, nil)
}

// abortedBelow keeps the aborts whose marker lies before cut.
func abortedBelow(entries []hotlog.AbortedTxn, cut int64) []hotlog.AbortedTxn {
	var out []hotlog.AbortedTxn
	for _, a := range entries {
		if a.LastOffset < cut {
			out = append(out, a)
		}
	}
	return out
}

// scanBatches applies src's batches below cut to state, in order, and
// writes them to w (if not nil); the batch straddling the cut is cut down
// to its records below it.
func (r *restoreRun) scanBatches(src *ObjectReader, cut int64, state *hotlog.ProducerTable, w *tailWriter) error {
	v, err := src.openVerified(r.ctx, 0)
	if err != nil {
		return fmt.Errorf("tier: restore reading %s: %w", src.key, err)
	}
	defer v.Close()
	br := bufio.NewReaderSize(v, 1<<20)
	var tr batchTruncator
	defer tr.close()
	end := src.Index.Footer.Sections[SectionBatches].Length
	for pos := int64(0); pos < end; {
		batch, h, err := readObjectBatch(br, end-pos)
		if err != nil {
			return fmt.Errorf("tier: restore reading %s at %d: %w", src.key, pos, err)
		}
		pos += int64(len(batch))
		if h.BaseOffset >= cut {
			return nil
		}
		if h.LastOffset() >= cut {
			if batch, err = tr.truncate(batch, h, cut, r.maxBatchBytes()); err != nil {
				return fmt.Errorf("%s: %w", src.key, err)
			}
		}
		if _, _, err := state.Apply(batch); err != nil {
			return corruptf("%s: batch at offset %d: %v", src.key, h.BaseOffset, err)
		}
		if w != nil {
			if err := w.write(batch); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *restoreRun) maxBatchBytes() int {
	if r.opts.MaxBatchBytes > 0 {
		return r.opts.MaxBatchBytes
	}
	return maxDecodeBytes
}

// batchTruncator re-encodes batches. Owned by one goroutine.
type batchTruncator struct {
	dec  recordbatch.Decompressor
	comp recordbatch.Compressor
}

func (t *batchTruncator) close() { t.dec.Close(); t.comp.Close() }

// truncate returns h's batch holding only its records below cut, with the
// same codec and header, except lastOffsetDelta (cut-1-base: the kept
// sequences are a prefix, so the producer's last sequence stays right),
// record count, and for CreateTime batches maxTimestamp (of the kept
// records). REQUIRES: h.BaseOffset < cut <= h.LastOffset().
func (t *batchTruncator) truncate(batch []byte, h recordbatch.Header, cut int64, maxBytes int) ([]byte, error) {
	records, err := t.dec.DecodeRecords(batch, maxBytes)
	if err != nil {
		return nil, corruptf("batch at offset %d: %v", h.BaseOffset, err)
	}
	keep := int32(cut - 1 - h.BaseOffset)
	var raw []byte
	n, maxTS := int32(0), h.FirstTimestamp
	for i := range records {
		rec := &records[i]
		if rec.OffsetDelta < 0 || rec.OffsetDelta > keep {
			continue
		}
		raw = rec.AppendTo(raw)
		n++
		maxTS = max(maxTS, h.FirstTimestamp+rec.TimestampDelta64)
	}
	out := h
	out.LastOffsetDelta = keep
	if !h.LogAppendTime() {
		out.MaxTimestamp = maxTS
	}
	compressed, err := t.comp.Compress(nil, h.Codec(), raw)
	if err != nil {
		return nil, corruptf("batch at offset %d: %v", h.BaseOffset, err)
	}
	return recordbatch.Encode(nil, out, n, compressed), nil
}

// appendAbortMarker writes an ABORT control batch for txn at offset (the
// producer's id and epoch, coordinator epoch 0, leader epoch epoch,
// timestamp ts) and applies it to state, which gives its abort entry.
func appendAbortMarker(w *tailWriter, state *hotlog.ProducerTable, txn hotlog.OpenTxn, offset int64, epoch int32,
	ts int64) (hotlog.AbortedTxn, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(hotlog.MarkerBatch(txn.ProducerID, txn.ProducerEpoch, false, 0, ts)); err != nil {
		return hotlog.AbortedTxn{}, fmt.Errorf("tier: restore marker: %w", err)
	}
	// Neither field is covered by the batch CRC.
	b.FirstOffset, b.PartitionLeaderEpoch = offset, epoch
	marker := b.AppendTo(nil)
	a, ok, err := state.Apply(marker)
	if err != nil || !ok {
		return hotlog.AbortedTxn{}, fmt.Errorf("tier: restore marker of producer %d not applied as an abort: %v", txn.ProducerID, err)
	}
	if err := w.write(marker); err != nil {
		return hotlog.AbortedTxn{}, err
	}
	return hotlog.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset,
		LastStableOffset: a.LastStableOffset}, nil
}

// tailWriter assembles the tail object's batches in a temp file, created
// on the first write. Owned by one goroutine.
type tailWriter struct {
	dir  string
	f    *os.File
	size int64
}

func (w *tailWriter) write(b []byte) error {
	if w.f == nil {
		f, err := os.CreateTemp(w.dir, "strata-restore-*.tmp")
		if err != nil {
			return fmt.Errorf("tier: restore: %w", err)
		}
		w.f = f
	}
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("tier: restore: %w", err)
	}
	w.size += int64(len(b))
	return nil
}

func (w *tailWriter) close() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// putTail encodes the tail object (with the producer snapshot as of end
// when it fits), uploads it under the restored id, verifies it whole and
// returns its entry. A failed verification deletes it.
func (r *restoreRun) putTail(w *tailWriter, state *hotlog.ProducerTable, keyBase, end int64, epoch int32,
	aborted []hotlog.AbortedTxn) (*metadata.TierEntry, error) {
	snap, err := state.Snapshot(end)
	if err != nil {
		return nil, fmt.Errorf("tier: restore: %w", err)
	}
	if len(snap) > maxRestoreSnapshotBytes {
		snap = nil
	}
	obj, err := EncodeSegmentObject(w.f, w.size, SegmentMeta{Topic: r.t.Topic, TopicID: r.id, Partition: r.partition,
		UploadEpoch: epoch, ProducerSnapshot: snap, AbortedTxns: aborted})
	if err != nil {
		return nil, fmt.Errorf("tier: restore encoding the tail object: %w", err)
	}
	key, err := SegmentKey(SegmentKeyParts{Cluster: r.t.Cluster, Topic: r.t.Topic, TopicID: r.id,
		Partition: r.partition, BaseOffset: keyBase, Epoch: epoch})
	if err != nil {
		return nil, err
	}
	if err := r.store.Put(r.ctx, key, obj.NewReader(), obj.Size()); err != nil {
		return nil, fmt.Errorf("tier: restore put %s: %w", key, err)
	}
	if err := Verify(r.ctx, r.store, key, obj.Footer(), true); err != nil {
		_ = r.store.Delete(r.ctx, key)
		return nil, fmt.Errorf("tier: restore verify %s: %w", key, err)
	}
	f := obj.Footer()
	return &metadata.TierEntry{TopicID: r.id, Partition: r.partition, BaseOffset: keyBase, LastOffset: f.LastOffset,
		FirstTimestamp: f.FirstTimestamp, MaxTimestamp: f.MaxTimestamp, LeaderEpoch: entryEpoch(f, obj.Index.Epochs),
		Key: key, Size: obj.Size()}, nil
}

// BucketTopic is one incarnation of a topic in the bucket.
type BucketTopic struct {
	Name string
	ID   metadata.TopicID
	// File is its topic.json; nil when absent or unusable (FileErr).
	File *TopicFile
	// FileErr: topic.json exists but is corrupt or names another topic (wraps ErrCorruptObject).
	FileErr error
	Newest  time.Time // newest ModTime of its objects and topic.json
	Objects int       // segment objects
}

// ListBucketTopics lists the topics of a cluster in the bucket: every
// incarnation (topic id) of each name, sorted by name, then newest first
// (the first of a name is its latest incarnation), then by id.
func ListBucketTopics(ctx context.Context, store ObjectStore, cluster string) ([]BucketTopic, error) {
	prefix := cluster + "/" + topicsElement + "/"
	infos, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("tier: listing %s: %w", prefix, err)
	}
	byDir := map[string]*BucketTopic{}
	files := map[string]ObjectInfo{}
	for _, info := range infos {
		dir, name, _ := strings.Cut(strings.TrimPrefix(info.Key, prefix), "/")
		var p SegmentKeyParts
		if parseTopicElement(dir, &p) != nil {
			continue
		}
		isFile := name == topicConfigName
		if !isFile {
			if sp, err := ParseSegmentKey(info.Key); err != nil || sp.Cluster != cluster {
				continue
			}
		}
		bt := byDir[dir]
		if bt == nil {
			bt = &BucketTopic{Name: p.Topic, ID: p.TopicID}
			byDir[dir] = bt
		}
		if info.ModTime.After(bt.Newest) {
			bt.Newest = info.ModTime
		}
		if isFile {
			files[dir] = info
		} else {
			bt.Objects++
		}
	}
	return collectBucketTopics(ctx, store, byDir, files)
}

// collectBucketTopics reads each incarnation's topic.json and sorts them.
func collectBucketTopics(ctx context.Context, store ObjectStore, byDir map[string]*BucketTopic,
	files map[string]ObjectInfo) ([]BucketTopic, error) {
	out := make([]BucketTopic, 0, len(byDir))
	for dir, bt := range byDir {
		if info, ok := files[dir]; ok {
			if err := readBucketTopicFile(ctx, store, info, bt); err != nil {
				return nil, err
			}
		}
		out = append(out, *bt)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if !a.Newest.Equal(b.Newest) {
			return a.Newest.After(b.Newest)
		}
		return a.ID.String() < b.ID.String()
	})
	return out, nil
}

// readBucketTopicFile fills bt.File (or bt.FileErr) from topic.json. A
// file deleted since the listing is absent; other read errors fail.
func readBucketTopicFile(ctx context.Context, store ObjectStore, info ObjectInfo, bt *BucketTopic) error {
	if info.Size > MaxTopicFileBytes {
		bt.FileErr = corruptf("%s: %d bytes", info.Key, info.Size)
		return nil
	}
	b, err := objstore.ReadAll(ctx, store, info.Key, 0, info.Size)
	if err != nil {
		if store.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("tier: reading %s: %w", info.Key, err)
	}
	f, err := DecodeTopicFile(b)
	switch {
	case err != nil:
		bt.FileErr = fmt.Errorf("%s: %w", info.Key, err)
	case f.Topic != bt.Name || f.TopicID != bt.ID.String():
		bt.FileErr = corruptf("%s names topic %s id %s", info.Key, f.Topic, f.TopicID)
	default:
		bt.File = &f
	}
	return nil
}
