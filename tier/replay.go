package tier

// Bucket-only replay (`strata replay`, DESIGN.md §8): find a topic's
// objects by listing the bucket, choose which object serves each offset
// without a manifest, and stream the chosen batches in offset order.
//
// # Choosing objects without a manifest
//
// Several objects may hold the same offsets: an upload retried (by the same
// leader after a crash, or by a new leader), or a compaction swap whose old
// objects are not deleted yet (DeleteGrace) or were left by a crash. Every
// object holds only committed, checked batches, so any object that covers
// an offset has the right record there, except that a compacted object
// has dropped some. Each object claims [key base offset, footer last
// offset]: the key's base, not the footer's, because a compacted object's
// key carries its manifest entry's base, which may lie before its first
// batch (the records in between were compacted away).
//
// PlanReplay ranks the objects: the highest upload epoch first (a newer
// leader's data wins over an older leader's, as truncation would have
// it), then the newest ModTime (a compaction's output is written after the
// objects it replaces, usually with the same epoch), then the greater key.
// Going down that ranking, each object serves the offsets of its claim
// that no better-ranked object claims. The result is a list of pieces
// (object, [From, To]) that do not overlap, in offset order; a reader
// returns whole batches and the caller keeps the records inside the
// piece's bounds.
//
// Known limit: a compacted run's last object may claim offsets after its
// last batch (its entry ended at the run's end); the bucket does not say
// so, and while the replaced objects still exist, those offsets are served
// from them: replay may then show records compaction removed, never lose one.
//
// # Where the bucket ends
//
// The bucket holds a partition's uploaded history only: the hot tail of
// the cluster that wrote it (and, after retention, its oldest records)
// are not there, and nothing in the bucket tells whether they exist.
// PlanExtent says what the pieces cover, the first and last offsets and
// their times from the footers, and the holes between pieces (offsets no
// object claims: an object lost or deleted by hand), so that a caller can
// say which part of a requested range the bucket could not serve.
//
// # Transactions
//
// Control batches are never returned. With Committed set, a transactional
// batch of producer P is dropped when an aborted-transaction entry of P
// (collected from every object of the partition, since an abort's marker
// may lie in a later object) has FirstOffset <= batch base <= LastOffset.
// A transactional batch not known to be aborted is committed only once
// P's next control batch has been read: the reader holds it, and every
// later batch so that order is kept (as a consumer stops at the LSO),
// until every held producer's marker has been read. A transaction whose
// marker is not in the bucket (still open, or its marker is in the hot tail
// not uploaded yet) is never returned: Held reports its first offset.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// ErrReplayTopic: the topic is not in the bucket, or is ambiguous.
var ErrReplayTopic = errors.New("tier: replay topic")

// ErrReplayHeldTooLarge: an undecided transaction kept more batches back
// than ReplayOptions.MaxHeldBytes allows.
var ErrReplayHeldTooLarge = errors.New("tier: replay: too many bytes held behind an undecided transaction")

// replayFooterWorkers bounds the concurrent footer reads of a listing.
const replayFooterWorkers = 8

// ReplayObject is one segment object of a partition, as listed.
type ReplayObject struct {
	Key     string
	Size    int64
	ModTime time.Time
	KeyBase int64 // base offset in the key (the manifest entry's base)
	Footer  *Footer
}

// Claim is the range of offsets the object claims: [min(key base, footer
// base), footer last offset].
func (o ReplayObject) Claim() (from, to int64) {
	return min(o.KeyBase, o.Footer.BaseOffset), o.Footer.LastOffset
}

// ReplayTopic is a topic found in the bucket: its objects by partition,
// each list in key (base offset) order.
type ReplayTopic struct {
	Cluster    string
	Topic      string
	TopicID    metadata.TopicID
	Partitions map[int32][]ReplayObject
	// File is the incarnation's topic.json: nil when absent or unusable
	// (FileErr says why). Only it knows of partitions without objects.
	File    *TopicFile
	FileErr error
}

// PartitionIDs returns the partitions that have objects, ascending.
func (t *ReplayTopic) PartitionIDs() []int32 {
	ids := make([]int32, 0, len(t.Partitions))
	for p := range t.Partitions {
		ids = append(ids, p)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// AllPartitionIDs returns 0..N-1, N being topic.json's partition count
// or, if larger, one past the greatest partition with objects; without a
// usable topic.json, only the partitions that have objects.
func (t *ReplayTopic) AllPartitionIDs() []int32 {
	ids := t.PartitionIDs()
	if t.File == nil {
		return ids
	}
	n := t.File.Partitions
	if len(ids) > 0 {
		n = max(n, ids[len(ids)-1]+1)
	}
	all := make([]int32, n)
	for p := range all {
		all[p] = int32(p)
	}
	return all
}

// FindReplayTopic lists <cluster>/topics/<topic>-<id>/ and reads the
// footer of every object of the partitions wanted (nil: all), one ranged
// GET of FooterSize bytes each. topicID may be empty unless the topic was
// deleted and re-created, leaving several incarnations in the bucket
// (ErrReplayTopic names them).
func FindReplayTopic(ctx context.Context, store ObjectStore, cluster, topic, topicID string,
	wanted func(partition int32) bool) (*ReplayTopic, error) {
	infos, err := store.List(ctx, cluster+"/"+topicsElement+"/"+topic+"-")
	if err != nil {
		return nil, fmt.Errorf("tier: listing %s: %w", topic, err)
	}
	byID := groupReplayObjects(infos, cluster, topic, topicID, wanted)
	if len(byID) == 0 {
		return nil, fmt.Errorf("%w: no objects of topic %q in cluster %q", ErrReplayTopic, topic, cluster)
	}
	if len(byID) > 1 {
		var ids []string
		for id := range byID {
			ids = append(ids, id.String())
		}
		sort.Strings(ids)
		return nil, fmt.Errorf("%w: topic %q has several incarnations (topic ids %s): choose one by its id", ErrReplayTopic, topic,
			strings.Join(ids, ", "))
	}
	var id metadata.TopicID
	for only := range byID {
		id = only
	}
	t, err := loadReplayTopic(ctx, store, cluster, topic, id, byID[id])
	if err != nil {
		return nil, err
	}
	readReplayTopicFile(ctx, store, infos, t)
	return t, nil
}

// readReplayTopicFile fills t.File, or t.FileErr, from the topic.json
// listed with the objects, if any. A topic.json that cannot be read is
// not an error: replay then knows only the partitions that have objects.
func readReplayTopicFile(ctx context.Context, store ObjectStore, infos []ObjectInfo, t *ReplayTopic) {
	key := TopicConfigKey(t.Cluster, t.Topic, t.TopicID)
	i := slices.IndexFunc(infos, func(info ObjectInfo) bool { return info.Key == key })
	if i < 0 {
		return
	}
	bt := BucketTopic{Name: t.Topic, ID: t.TopicID}
	if err := readBucketTopicFile(ctx, store, infos[i], &bt); err != nil {
		bt.FileErr = err
	}
	t.File, t.FileErr = bt.File, bt.FileErr
}

// groupReplayObjects keeps the listed objects of the topic (and topicID,
// if given) by topic id. A topic id with objects only in partitions not
// wanted maps to nil: the topic exists.
func groupReplayObjects(infos []ObjectInfo, cluster, topic, topicID string,
	wanted func(int32) bool) map[metadata.TopicID][]ReplayObject {
	byID := map[metadata.TopicID][]ReplayObject{}
	for _, info := range infos {
		if !strings.HasSuffix(info.Key, segmentSuffix) {
			continue // topic.json, or a stray file
		}
		p, err := ParseSegmentKey(info.Key)
		if err != nil || p.Topic != topic || p.Cluster != cluster {
			continue // another topic whose name starts with topic + "-"
		}
		if topicID != "" && p.TopicID.String() != topicID {
			continue
		}
		if wanted != nil && !wanted(p.Partition) {
			if _, ok := byID[p.TopicID]; !ok {
				byID[p.TopicID] = nil
			}
			continue
		}
		byID[p.TopicID] = append(byID[p.TopicID], ReplayObject{Key: info.Key, Size: info.Size, ModTime: info.ModTime,
			KeyBase: p.BaseOffset})
	}
	return byID
}

func loadReplayTopic(ctx context.Context, store ObjectStore, cluster, topic string, id metadata.TopicID,
	objs []ReplayObject) (*ReplayTopic, error) {
	if err := readReplayFooters(ctx, store, objs); err != nil {
		return nil, err
	}
	t := &ReplayTopic{Cluster: cluster, Topic: topic, TopicID: id, Partitions: map[int32][]ReplayObject{}}
	for _, o := range objs {
		if o.Footer.TopicID != id || o.Footer.Topic != topic || o.KeyBase > o.Footer.BaseOffset ||
			o.Footer.Partition != mustPartition(o.Key) {
			return nil, corruptf("%s: footer %s-%s-%d base %d does not match its key", o.Key, o.Footer.Topic,
				o.Footer.TopicID, o.Footer.Partition, o.Footer.BaseOffset)
		}
		t.Partitions[o.Footer.Partition] = append(t.Partitions[o.Footer.Partition], o)
	}
	return t, nil
}

// mustPartition is the partition in a key FindReplayTopic already parsed.
func mustPartition(key string) int32 {
	p, _ := ParseSegmentKey(key)
	return p.Partition
}

// readReplayFooters fills each object's Footer, a few GETs at a time.
func readReplayFooters(ctx context.Context, store ObjectStore, objs []ReplayObject) error {
	var wg sync.WaitGroup
	errs := make([]error, len(objs))
	sem := make(chan struct{}, replayFooterWorkers)
	for i := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			objs[i].Footer, errs[i] = readReplayFooter(ctx, store, objs[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func readReplayFooter(ctx context.Context, store ObjectStore, o ReplayObject) (*Footer, error) {
	if o.Size < FooterSize {
		return nil, corruptf("%s: %d bytes, smaller than a footer", o.Key, o.Size)
	}
	b, err := objstore.ReadAll(ctx, store, o.Key, o.Size-FooterSize, FooterSize)
	if err != nil {
		return nil, fmt.Errorf("tier: reading the footer of %s: %w", o.Key, err)
	}
	f, err := DecodeFooter(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	if f.ObjectSize() != o.Size {
		return nil, corruptf("%s: footer describes %d bytes, object has %d", o.Key, f.ObjectSize(), o.Size)
	}
	return f, nil
}

// ReplayPiece is the range [From, To] of offsets that Object serves.
type ReplayPiece struct {
	Object   ReplayObject
	From, To int64
}

// ReplayExtent is what the bucket holds of one partition, as PlanReplay
// sees it: the bucket cannot tell what lies outside it, nor in its holes.
type ReplayExtent struct {
	First, Last int64 // the first and last offsets some object claims
	// FirstTime is the first timestamp of the object serving First, and
	// LastTime the max timestamp of the object serving Last: the time of
	// the bucket's last record as near as footers tell (exact when
	// timestamps do not decrease along offsets).
	FirstTime, LastTime int64
	Holes               [][2]int64 // [from, to] inside [First, Last] that no object claims, ascending
}

// PlanExtent is the extent of pieces (from PlanReplay); ok is false when
// there are none. Pure: no I/O.
func PlanExtent(pieces []ReplayPiece) (ext ReplayExtent, ok bool) {
	if len(pieces) == 0 {
		return ReplayExtent{}, false
	}
	first, last := pieces[0], pieces[len(pieces)-1]
	return ReplayExtent{First: first.From, Last: last.To, FirstTime: first.Object.Footer.FirstTimestamp,
		LastTime: last.Object.Footer.MaxTimestamp, Holes: planGaps(pieces, math.MaxInt64)}, true
}

// replaySpan is an inclusive offset range.
type replaySpan struct{ from, to int64 }

// PlanReplay chooses, for every offset some object claims, the object that
// serves it (see the ranking above), and returns the pieces in offset
// order. Pure: no I/O.
func PlanReplay(objs []ReplayObject) []ReplayPiece {
	ranked := append([]ReplayObject(nil), objs...)
	sort.SliceStable(ranked, func(i, j int) bool { return replayBetter(ranked[i], ranked[j]) })
	var claimed []replaySpan // sorted, disjoint
	var pieces []ReplayPiece
	for _, o := range ranked {
		from, to := o.Claim()
		for _, s := range subtractSpans(replaySpan{from, to}, claimed) {
			pieces = append(pieces, ReplayPiece{Object: o, From: s.from, To: s.to})
		}
		claimed = addSpan(claimed, replaySpan{from, to})
	}
	sort.Slice(pieces, func(i, j int) bool { return pieces[i].From < pieces[j].From })
	return pieces
}

// replayBetter ranks a before b: higher upload epoch, newer, greater key.
func replayBetter(a, b ReplayObject) bool {
	if a.Footer.UploadEpoch != b.Footer.UploadEpoch {
		return a.Footer.UploadEpoch > b.Footer.UploadEpoch
	}
	if !a.ModTime.Equal(b.ModTime) {
		return a.ModTime.After(b.ModTime)
	}
	return a.Key > b.Key
}

// subtractSpans returns the parts of s outside every span of claimed.
// REQUIRES: claimed sorted and disjoint.
func subtractSpans(s replaySpan, claimed []replaySpan) []replaySpan {
	var out []replaySpan
	next := s.from
	for _, c := range claimed {
		if c.to < next || c.from > s.to {
			continue
		}
		if c.from > next {
			out = append(out, replaySpan{next, c.from - 1})
		}
		next = c.to + 1
		if next > s.to {
			return out
		}
	}
	return append(out, replaySpan{next, s.to})
}

// addSpan inserts s into claimed, merging overlapping and adjacent spans.
func addSpan(claimed []replaySpan, s replaySpan) []replaySpan {
	var out []replaySpan
	for _, c := range claimed {
		switch {
		case c.to+1 < s.from:
			out = append(out, c)
		case s.to+1 < c.from:
			out = append(out, s)
			s = c
		default:
			s = replaySpan{min(s.from, c.from), max(s.to, c.to)}
		}
	}
	return append(out, s)
}

// ReplayAborted reads the aborted-transaction sections of objs whose last
// offset is at or after from (an abort whose marker lies before from
// cannot cover a batch at or after it), each checked against its CRC and
// the section's invariants. Duplicates (the same abort in overlapping
// objects) are kept: they are harmless to the reader.
func ReplayAborted(ctx context.Context, store ObjectStore, objs []ReplayObject, from int64) ([]hotlog.AbortedTxn, error) {
	var out []hotlog.AbortedTxn
	for _, o := range objs {
		ref := o.Footer.Sections[SectionAbortedTxns]
		if o.Footer.LastOffset < from || ref.Length == 0 {
			continue
		}
		if ref.Length > MaxIndexSectionBytes {
			return nil, corruptf("%s: aborted section of %d bytes", o.Key, ref.Length)
		}
		b, err := objstore.ReadAll(ctx, store, o.Key, ref.Offset, ref.Length)
		if err != nil {
			return nil, fmt.Errorf("tier: reading aborted transactions of %s: %w", o.Key, err)
		}
		if crc32c(b) != ref.CRC || len(b)%abortedEntrySize != 0 {
			return nil, corruptf("%s: aborted-transaction section crc or length", o.Key)
		}
		x := &ObjectIndex{Footer: o.Footer, Aborted: decodeAborted(b)}
		if err := x.checkAborted(); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Key, err)
		}
		out = append(out, x.Aborted...)
	}
	return out, nil
}

// ReplayOptions tune a ReplayReader.
type ReplayOptions struct {
	// From is the first offset wanted: batches wholly before it are skipped.
	From int64
	// FromTime, if >= 0, skips batches before the first one whose
	// maxTimestamp reaches it (a hint: the caller filters records).
	FromTime int64
	// Committed drops aborted transactions and holds undecided ones.
	Committed bool
	// Aborted are the partition's aborts (ReplayAborted).
	Aborted []hotlog.AbortedTxn
	// MaxHeldBytes bounds the batch bytes held behind undecided
	// transactions (default 256 MiB).
	MaxHeldBytes int64
	Logger       *slog.Logger
}

// ReplayBatch is one batch and the offsets of it that the caller keeps.
type ReplayBatch struct {
	Data     []byte
	Header   recordbatch.Header
	From, To int64 // the piece's bounds
}

// ReplayReader returns a partition's batches in offset order along a plan.
// Owned by one goroutine.
type ReplayReader struct {
	ctx    context.Context
	store  ObjectStore
	pieces []ReplayPiece
	opts   ReplayOptions
	abort  map[int64][]hotlog.AbortedTxn // by producer, sorted by LastOffset

	next     int // next piece to open
	piece    ReplayPiece
	cur      *verifiedReader
	br       *bufio.Reader
	pos, end int64
	started  bool // a batch reaching FromTime was read

	open      map[int64]int64 // producers with a held transaction -> its first offset
	held      []ReplayBatch   // batches behind them, in order
	heldBytes int64
	ready     []ReplayBatch // released batches not yet returned
	bytesRead int64
}

// NewReplayReader returns a reader of pieces (from PlanReplay).
func NewReplayReader(ctx context.Context, store ObjectStore, pieces []ReplayPiece, opts ReplayOptions) *ReplayReader {
	if opts.MaxHeldBytes <= 0 {
		opts.MaxHeldBytes = 256 << 20
	}
	r := &ReplayReader{ctx: ctx, store: store, pieces: pieces, opts: opts, abort: map[int64][]hotlog.AbortedTxn{},
		open: map[int64]int64{}, started: opts.FromTime < 0}
	for _, a := range opts.Aborted {
		r.abort[a.ProducerID] = append(r.abort[a.ProducerID], a)
	}
	for _, list := range r.abort {
		sort.Slice(list, func(i, j int) bool { return list[i].LastOffset < list[j].LastOffset })
	}
	return r
}

// BytesRead is the batch bytes read from the bucket so far.
func (r *ReplayReader) BytesRead() int64 { return r.bytesRead }

// Held reports, after Next returned io.EOF, the first offset held back
// behind a transaction whose marker is not in the bucket.
func (r *ReplayReader) Held() (offset int64, ok bool) {
	if len(r.held) == 0 {
		return 0, false
	}
	return r.held[0].Header.BaseOffset, true
}

// Next returns the next batch, or io.EOF after the last one.
func (r *ReplayReader) Next() (ReplayBatch, error) {
	for len(r.ready) == 0 {
		b, err := r.readBatch()
		if err != nil {
			return ReplayBatch{}, err
		}
		if err := r.admit(b); err != nil {
			return ReplayBatch{}, err
		}
	}
	b := r.ready[0]
	r.ready = r.ready[1:]
	return b, nil
}

// admit applies the transaction rules to one batch read.
func (r *ReplayReader) admit(b ReplayBatch) error {
	h := b.Header
	if h.Control() {
		delete(r.open, h.ProducerID)
		if len(r.open) == 0 && len(r.held) > 0 {
			r.ready, r.held, r.heldBytes = append(r.ready, r.held...), nil, 0
		}
		return nil
	}
	if r.opts.Committed && h.Transactional() {
		if r.aborted(h.ProducerID, h.BaseOffset) {
			return nil
		}
		if _, ok := r.open[h.ProducerID]; !ok {
			r.open[h.ProducerID] = h.BaseOffset
		}
	}
	if len(r.open) == 0 {
		r.ready = append(r.ready, b)
		return nil
	}
	r.held = append(r.held, b)
	r.heldBytes += int64(len(b.Data))
	if r.heldBytes > r.opts.MaxHeldBytes {
		return fmt.Errorf("%w: %d bytes from offset %d", ErrReplayHeldTooLarge, r.heldBytes, r.held[0].Header.BaseOffset)
	}
	return nil
}

// aborted reports whether an abort of producer covers offset.
func (r *ReplayReader) aborted(producer, offset int64) bool {
	list := r.abort[producer]
	i := sort.Search(len(list), func(i int) bool { return list[i].LastOffset >= offset })
	return i < len(list) && list[i].FirstOffset <= offset
}

// Close releases the object being read.
func (r *ReplayReader) Close() {
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
}

// readBatch returns the next batch of the plan inside its piece's bounds
// (at least partly), or io.EOF.
func (r *ReplayReader) readBatch() (ReplayBatch, error) {
	for {
		if r.cur == nil {
			if r.next == len(r.pieces) {
				return ReplayBatch{}, io.EOF
			}
			if err := r.openPiece(); err != nil {
				return ReplayBatch{}, err
			}
			continue
		}
		if r.pos >= r.end {
			r.Close()
			continue
		}
		data, h, err := readObjectBatch(r.br, r.end-r.pos)
		if err != nil {
			return ReplayBatch{}, fmt.Errorf("tier: replay reading %s at %d: %w", r.piece.Object.Key, r.pos, err)
		}
		r.pos += int64(len(data))
		r.bytesRead += int64(len(data))
		if h.BaseOffset > r.piece.To {
			r.Close()
			continue
		}
		if h.LastOffset() < max(r.piece.From, r.opts.From) || (!r.started && h.MaxTimestamp < r.opts.FromTime) {
			continue
		}
		r.started = true
		return ReplayBatch{Data: data, Header: h, From: r.piece.From, To: r.piece.To}, nil
	}
}

// openPiece opens the next piece's object at the first batch that may
// matter, or skips the piece when nothing in it does.
func (r *ReplayReader) openPiece() error {
	p := r.pieces[r.next]
	r.next++
	from := max(p.From, r.opts.From, p.Object.Footer.BaseOffset)
	if from > min(p.To, p.Object.Footer.LastOffset) || (!r.started && p.Object.Footer.MaxTimestamp < r.opts.FromTime) {
		return nil
	}
	obj, err := OpenObject(r.ctx, r.store, p.Object.Key, p.Object.Size)
	if err != nil {
		return fmt.Errorf("tier: replay opening %s: %w", p.Object.Key, err)
	}
	start, _, err := obj.Index.OffsetSpan(from)
	if err != nil {
		return fmt.Errorf("tier: replay %s: %w", p.Object.Key, err)
	}
	if !r.started {
		if ts, ok := obj.Index.TimestampStart(r.opts.FromTime); ok {
			start = max(start, ts)
		}
	}
	v, err := obj.openVerified(r.ctx, start)
	if err != nil {
		return fmt.Errorf("tier: replay reading %s: %w", p.Object.Key, err)
	}
	r.piece, r.cur, r.pos, r.end = p, v, start, obj.Index.Footer.Sections[SectionBatches].Length
	if r.br == nil {
		r.br = bufio.NewReaderSize(v, 1<<20)
	} else {
		r.br.Reset(v)
	}
	return nil
}
