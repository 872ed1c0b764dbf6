package hotlog

// The aborted-transaction index, <base:020>.txnindex (doc.go,
// "Transactions"): encoding, bounded decoding, writes, and the rebuild that
// goes with the producer state.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-log/strata/recordbatch"
)

// Aborted-transaction index format constants. Part of the on-disk format.
const (
	txnIndexSuffix     = ".txnindex"
	txnIndexVersion    = 0
	txnIndexEntrySize  = 2 + 8 + 8 + 8 + 8 // version, producerId, first, last, lastStable
	maxTxnIndexEntries = 1 << 20           // bound before reading a file (34 MiB)
)

var errBadTxnIndex = errors.New("hotlog: bad aborted-transaction index")

// appendTxnEntry appends a's 34-byte encoding to b.
func appendTxnEntry(b []byte, a AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, txnIndexVersion)
	b = be.AppendUint64(b, uint64(a.ProducerID))
	b = be.AppendUint64(b, uint64(a.FirstOffset))
	b = be.AppendUint64(b, uint64(a.LastOffset))
	return be.AppendUint64(b, uint64(a.LastStableOffset))
}

// EncodeAbortedTxns encodes entries in the .txnindex format (also the
// tiered segment object's aborted-transaction section).
func EncodeAbortedTxns(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, a := range entries {
		b = appendTxnEntry(b, a)
	}
	return b
}

// DecodeAbortedTxns parses a .txnindex (or an object's section) of the
// segment at base: whole entries only, version 0, producer id >= 0,
// base <= lastOffset <= maxOffset, 0 <= firstOffset <= lastOffset,
// lastOffset strictly increasing, lastStableOffset <= lastOffset+1.
func DecodeAbortedTxns(b []byte, base int64) ([]AbortedTxn, error) {
	if len(b)%txnIndexEntrySize != 0 || len(b)/txnIndexEntrySize > maxTxnIndexEntries {
		return nil, fmt.Errorf("%w: %d bytes", errBadTxnIndex, len(b))
	}
	be := binary.BigEndian
	out := make([]AbortedTxn, 0, len(b)/txnIndexEntrySize)
	prev := int64(-1)
	for p := 0; p < len(b); p += txnIndexEntrySize {
		e := b[p:]
		a := AbortedTxn{ProducerID: int64(be.Uint64(e[2:])), FirstOffset: int64(be.Uint64(e[10:])),
			LastOffset: int64(be.Uint64(e[18:])), LastStableOffset: int64(be.Uint64(e[26:]))}
		if v := be.Uint16(e); v != txnIndexVersion || a.ProducerID < 0 || a.LastOffset < base || a.LastOffset > maxOffset ||
			a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastOffset <= prev || a.LastStableOffset > a.LastOffset+1 {
			return nil, fmt.Errorf("%w: entry %d (version %d) %+v", errBadTxnIndex, p/txnIndexEntrySize, v, a)
		}
		out, prev = append(out, a), a.LastOffset
	}
	return out, nil
}

// loadTxnIndex reads the segment's index; a missing file is an empty one.
func loadTxnIndex(dir string, base int64) ([]AbortedTxn, error) {
	path := segmentFileName(dir, base, txnIndexSuffix)
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Size() > maxTxnIndexEntries*txnIndexEntrySize {
		return nil, fmt.Errorf("%w: %d bytes", errBadTxnIndex, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeAbortedTxns(data, base)
}

// writeTxnEntries appends entries (already in s.aborted) to s's index
// file and fsyncs it, and the directory when the file is new. Aborts are
// rare, so the file is opened per write; the fsyncs keep the entries of
// segments below a producer snapshot durable (the rebuild trusts them).
// REQUIRES: appendMu held (s.aborted changes only under it).
func (l *Log) writeTxnEntries(s *segment, entries []AbortedTxn) error {
	created := len(s.aborted) == len(entries)
	f, err := os.OpenFile(segmentFileName(l.dir, s.base, txnIndexSuffix), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return l.fail(fmt.Errorf("txn index %d: %w", s.base, err))
	}
	if _, err = f.Write(EncodeAbortedTxns(entries)); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && created {
		err = syncDir(l.dir)
	}
	if err != nil {
		return l.fail(fmt.Errorf("txn index %d: %w", s.base, err))
	}
	return nil
}

// loadTxnIndexesLocked loads every segment's index. A bad one is deleted
// with a warning and its entries must be re-derived: the returned offset
// (the lowest such segment's base, else maxOffset) bounds the producer
// snapshot the rebuild may start from.
// REQUIRES: as rebuildProducersLocked.
func (l *Log) loadTxnIndexesLocked() (int64, error) {
	limit := int64(maxOffset)
	for _, s := range l.mu.segments {
		entries, err := loadTxnIndex(l.dir, s.base)
		if err != nil {
			l.logger.Warn("hotlog: rebuilding bad aborted-transaction index", "dir", l.dir, "segment", s.base, "err", err)
			if rerr := os.Remove(segmentFileName(l.dir, s.base, txnIndexSuffix)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return 0, rerr
			}
			entries, limit = nil, min(limit, s.base)
		}
		s.aborted = entries
	}
	return limit, nil
}

// trimTxnIndexesLocked drops the entries whose marker is at or after from
// (the rebuild re-derives them) and returns the segments it changed.
func (l *Log) trimTxnIndexesLocked(from int64) map[*segment]bool {
	changed := map[*segment]bool{}
	for _, s := range l.mu.segments {
		n := len(s.aborted)
		for n > 0 && s.aborted[n-1].LastOffset >= from {
			n--
		}
		if n != len(s.aborted) {
			s.aborted, changed[s] = s.aborted[:n:n], true
		}
	}
	return changed
}

// applyScannedLocked applies one batch met by the rebuild scan, reading
// the marker of a control batch; an unreadable marker (damage in a
// trusted segment) is applied as a commit, with a warning.
func (l *Log) applyScannedLocked(s *segment, pos int64, h recordbatch.Header, changed map[*segment]bool) {
	if !h.Control() || !idempotent(h) {
		l.producers.apply(h)
		return
	}
	m := txnMarker{commit: true, coordinatorEpoch: -1}
	b, err := s.readBatch(pos, h)
	if err == nil {
		m, err = parseTxnMarker(b)
	}
	if err != nil {
		l.logger.Warn("hotlog: unreadable transaction marker applied as a commit", "dir", l.dir, "offset", h.BaseOffset, "err", err)
		m = txnMarker{commit: true, coordinatorEpoch: -1}
	}
	if a, ok := l.producers.applyBatch(h, m); ok {
		s.aborted = append(s.aborted, a)
		changed[s] = true
	}
}

// writeChangedTxnIndexesLocked replaces the index files the rebuild changed.
func (l *Log) writeChangedTxnIndexesLocked(changed map[*segment]bool) error {
	for s := range changed {
		name := filepath.Base(segmentFileName(l.dir, s.base, txnIndexSuffix))
		if len(s.aborted) == 0 {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := writeFileAtomic(l.dir, name, EncodeAbortedTxns(s.aborted)); err != nil {
			return err
		}
	}
	return nil
}
