package tier

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// runSource is the BatchSource over a run's old objects, in order: each
// object's footer and indexes are checked (OpenObject), every chunk of its
// batches against the footer's chunk CRCs and every batch against its own
// CRC before it is returned. Owned by the goroutine running the rewrite.
type runSource struct {
	ctx     context.Context
	store   ObjectStore
	entries []metadata.TierEntry

	next       int             // index of the next entry to open
	cur        *verifiedReader // reader of entries[next-1], nil between objects
	br         *bufio.Reader
	pos, end   int64 // position in, and length of, the current batches section
	lastOffset int64 // last offset returned so far (-1: none)
	done       bool  // io.EOF was returned

	bytes   int64 // batch bytes returned
	batches int
	// aborted collects every old object's aborted-transaction entries.
	aborted []hotlog.AbortedTxn
	// snapshot is the last old object's producer snapshot, as of snapshotAt.
	snapshot   []byte
	snapshotAt int64
}

var _ BatchSource = (*runSource)(nil)

// Next implements BatchSource.
func (s *runSource) Next() ([]byte, error) {
	for {
		if s.done {
			return nil, io.EOF
		}
		if s.cur == nil {
			if s.next == len(s.entries) {
				s.done = true
				return nil, io.EOF
			}
			if err := s.open(); err != nil {
				return nil, err
			}
		}
		if s.pos < s.end {
			return s.read()
		}
		s.close()
	}
}

// read returns the next batch of the current object.
func (s *runSource) read() ([]byte, error) {
	e := s.entries[s.next-1]
	batch, h, err := readObjectBatch(s.br, s.end-s.pos)
	if err != nil {
		return nil, fmt.Errorf("tier: compaction reading %s at %d: %w", e.Key, s.pos, err)
	}
	if h.BaseOffset <= s.lastOffset || h.BaseOffset < e.BaseOffset || h.LastOffset() > e.LastOffset {
		return nil, corruptf("%s: batch [%d, %d] after %d, entry [%d, %d]", e.Key, h.BaseOffset, h.LastOffset(),
			s.lastOffset, e.BaseOffset, e.LastOffset)
	}
	s.pos += int64(len(batch))
	s.lastOffset = h.LastOffset()
	s.bytes += int64(len(batch))
	s.batches++
	return batch, nil
}

// open opens the next object and checks that it is the entry's.
func (s *runSource) open() error {
	e := s.entries[s.next]
	r, err := OpenObject(s.ctx, s.store, e.Key, e.Size)
	if err != nil {
		return fmt.Errorf("tier: compaction opening %s: %w", e.Key, err)
	}
	f := r.Index.Footer
	if f.TopicID != e.TopicID || f.Partition != e.Partition || f.BaseOffset < e.BaseOffset || f.LastOffset > e.LastOffset {
		return corruptf("%s: footer %s-%d [%d, %d] does not match its entry [%d, %d]", e.Key, f.TopicID, f.Partition,
			f.BaseOffset, f.LastOffset, e.BaseOffset, e.LastOffset)
	}
	v, err := r.openVerified(s.ctx, 0)
	if err != nil {
		return fmt.Errorf("tier: compaction reading %s: %w", e.Key, err)
	}
	s.cur, s.pos, s.end = v, 0, f.Sections[SectionBatches].Length
	if s.br == nil {
		s.br = bufio.NewReaderSize(v, 1<<20)
	} else {
		s.br.Reset(v)
	}
	s.aborted = append(s.aborted, r.Index.Aborted...)
	s.snapshot, s.snapshotAt = r.Index.ProducerSnapshot, f.LastOffset+1
	s.next++
	return nil
}

// close closes the current object's reader, if any.
func (s *runSource) close() {
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
}

// finished checks that the rewrite read the whole run: a rewrite that
// stopped early would lose the batches it never saw.
func (s *runSource) finished() error {
	if s.done {
		return nil
	}
	if _, err := s.Next(); err != io.EOF {
		return fmt.Errorf("%w: the rewrite did not read the whole run (%v)", ErrInvalidCompaction, err)
	}
	return nil
}

// outBatch is one rewritten batch in the run's temp file.
type outBatch struct {
	pos        int64
	size       int64
	base, last int64
	control    bool
}

// runOutput collects the rewritten batches in a temp file. Owned by the
// goroutine running Compact.
type runOutput struct {
	file     *os.File
	w        *bufio.Writer
	size     int64
	batches  []outBatch
	from, to int64 // the run's offsets [from, to]
}

// runFilePattern names a run's output file in the compactor's TempDir.
const runFilePattern = "strata-compact-*.log"

// removeStaleRunFiles removes the run files a crash left in dir.
func removeStaleRunFiles(dir string, log *slog.Logger) {
	stale, _ := filepath.Glob(filepath.Join(dir, runFilePattern))
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			log.Warn("removing a stale compaction run file", "file", f, "err", err)
		}
	}
}

func newRunOutput(dir string, run CompactRun) (*runOutput, error) {
	f, err := os.CreateTemp(dir, runFilePattern)
	if err != nil {
		return nil, fmt.Errorf("tier: compaction temp file: %w", err)
	}
	return &runOutput{file: f, w: bufio.NewWriterSize(f, 1<<20), from: run.Entries[0].BaseOffset,
		to: run.Entries[len(run.Entries)-1].LastOffset}, nil
}

// append is the rewrite's sink: one whole, valid batch, above the previous
// one and inside the run.
func (o *runOutput) append(batch []byte) error {
	h, err := CheckStoredBatch(batch)
	if err == nil && h.Size() != len(batch) {
		err = fmt.Errorf("%d bytes for a %d-byte batch", len(batch), h.Size())
	}
	if err != nil {
		return fmt.Errorf("%w: rewritten batch: %v", ErrInvalidCompaction, err)
	}
	prev := o.from - 1
	if n := len(o.batches); n > 0 {
		prev = o.batches[n-1].last
	}
	if h.BaseOffset <= prev || h.LastOffset() > o.to {
		return fmt.Errorf("%w: rewritten batch [%d, %d] after %d, run ends at %d", ErrInvalidCompaction,
			h.BaseOffset, h.LastOffset(), prev, o.to)
	}
	if _, err := o.w.Write(batch); err != nil {
		return fmt.Errorf("tier: compaction temp file: %w", err)
	}
	o.batches = append(o.batches, outBatch{pos: o.size, size: int64(len(batch)), base: h.BaseOffset,
		last: h.LastOffset(), control: h.Control()})
	o.size += int64(len(batch))
	return nil
}

func (o *runOutput) close() {
	o.file.Close()
	os.Remove(o.file.Name())
}

// planPieces cuts the batches into at most maxPieces runs of about equal
// size, each at least target bytes unless there is only one: small
// outputs merge, and the object count never grows. A piece is also cut
// where the format's limits (u32 positions and relative offsets) require.
// Returns [start, end) batch index ranges.
func planPieces(batches []outBatch, total, target int64, maxPieces int) [][2]int {
	k := int64(min(int64(maxPieces), max(1, (total+target-1)/target)))
	chunk := (total + k - 1) / k
	var pieces [][2]int
	start, size := 0, int64(0)
	for i, b := range batches {
		if i > start && (b.last-batches[start].base > math.MaxUint32 || size+b.size > MaxBatchesBytes) {
			pieces, start, size = append(pieces, [2]int{start, i}), i, 0
		}
		size += b.size
		if size >= chunk && int64(len(pieces)) < k-1 && i+1 < len(batches) {
			pieces, start, size = append(pieces, [2]int{start, i + 1}), i+1, 0
		}
	}
	return append(pieces, [2]int{start, len(batches)})
}

// upload encodes, puts and verifies the new objects, and returns their
// entries (Version 0). On failure the objects already put are deleted.
func (c *Compactor) upload(ctx context.Context, run CompactRun, out *runOutput, src *runSource) ([]metadata.TierEntry, error) {
	if err := out.w.Flush(); err != nil {
		return nil, fmt.Errorf("tier: compaction temp file: %w", err)
	}
	pieces := planPieces(out.batches, out.size, run.TargetBytes, len(run.Entries))
	kept := map[int64]bool{} // offsets of the control batches kept
	for _, b := range out.batches {
		if b.control {
			kept[b.base] = true
		}
	}
	var news []metadata.TierEntry
	for i, p := range pieces {
		e, err := c.uploadPiece(ctx, run, out, src, out.batches[p[0]:p[1]], kept, news, i == len(pieces)-1)
		if err != nil {
			c.deleteNow(news)
			return nil, err
		}
		news = append(news, e)
	}
	return news, nil
}

// uploadPiece writes one new object. Its entry claims the offsets from the
// previous entry's end (or the run's start) to its last batch (or, for the
// last piece, to the run's end), so the entries stay contiguous.
func (c *Compactor) uploadPiece(ctx context.Context, run CompactRun, out *runOutput, src *runSource,
	batches []outBatch, kept map[int64]bool, prev []metadata.TierEntry, last bool) (metadata.TierEntry, error) {
	first := run.Entries[0]
	lo, hi := batches[0], batches[len(batches)-1]
	meta := SegmentMeta{Topic: run.Topic, TopicID: first.TopicID, Partition: first.Partition,
		UploadEpoch: run.UploadEpoch, IndexIntervalBytes: run.IndexIntervalBytes}
	for _, a := range src.aborted {
		if a.LastOffset >= lo.base && a.LastOffset <= hi.last && kept[a.LastOffset] {
			meta.AbortedTxns = append(meta.AbortedTxns, a)
		}
	}
	if last && hi.last+1 == src.snapshotAt {
		meta.ProducerSnapshot = src.snapshot // as of the run's end, which this object reaches
	}
	size := hi.pos + hi.size - lo.pos
	obj, err := EncodeSegmentObject(io.NewSectionReader(out.file, lo.pos, size), size, meta)
	if err != nil {
		return metadata.TierEntry{}, fmt.Errorf("tier: compaction encoding: %w", err)
	}
	e := metadata.TierEntry{TopicID: first.TopicID, Partition: first.Partition, BaseOffset: first.BaseOffset,
		LastOffset: hi.last, FirstTimestamp: obj.Footer().FirstTimestamp, MaxTimestamp: obj.Footer().MaxTimestamp,
		Size: obj.Size()}
	if n := len(prev); n > 0 {
		e.BaseOffset = prev[n-1].LastOffset + 1
	}
	if last {
		e.LastOffset = run.Entries[len(run.Entries)-1].LastOffset
	}
	if epochs := obj.Index.Epochs; len(epochs) > 0 {
		e.LeaderEpoch = epochs[len(epochs)-1].Epoch
	}
	e.Key, err = SegmentKey(SegmentKeyParts{Cluster: c.cfg.Cluster, Topic: run.Topic, TopicID: e.TopicID,
		Partition: e.Partition, BaseOffset: e.BaseOffset, Epoch: run.UploadEpoch})
	if err != nil {
		return metadata.TierEntry{}, err
	}
	if err := c.cfg.Store.Put(ctx, e.Key, obj.NewReader(), obj.Size()); err != nil {
		return metadata.TierEntry{}, fmt.Errorf("tier: compaction put %s: %w", e.Key, err)
	}
	if err := Verify(ctx, c.cfg.Store, e.Key, obj.Footer(), false); err != nil {
		c.deleteNow([]metadata.TierEntry{e})
		return metadata.TierEntry{}, fmt.Errorf("tier: compaction verify %s: %w", e.Key, err)
	}
	return e, nil
}

// ObjectBatches reads the batches of a contiguous run of a partition's
// objects in offset order (each object verified as a compaction run reads
// it), for callers that scan tiered data without rewriting it (the
// broker's offset map of a tiered cleaning pass). Close it when done.
type ObjectBatches struct{ src runSource }

var _ BatchSource = (*ObjectBatches)(nil)

// NewObjectBatches returns a reader of entries' batches from store.
func NewObjectBatches(ctx context.Context, store ObjectStore, entries []metadata.TierEntry) *ObjectBatches {
	return &ObjectBatches{src: runSource{ctx: ctx, store: store, entries: entries, lastOffset: -1}}
}

// Next implements BatchSource.
func (o *ObjectBatches) Next() ([]byte, error) { return o.src.Next() }

// Aborted returns the aborted-transaction entries of the objects opened so
// far (all of them once Next returned io.EOF).
func (o *ObjectBatches) Aborted() []hotlog.AbortedTxn { return o.src.aborted }

// Close releases the object being read.
func (o *ObjectBatches) Close() { o.src.close() }
