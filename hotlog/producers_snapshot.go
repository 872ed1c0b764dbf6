package hotlog

// Producer-state snapshot files (doc.go, "Producer-state snapshots"):
// encoding, decoding, listing, and rebuilding the table from the newest
// good snapshot plus the batch headers after it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-log/strata/recordbatch"
)

// Snapshot format constants. Part of the on-disk format; never change.
const (
	snapshotSuffix      = ".snapshot"
	snapshotVersion     = 1
	snapshotHeaderSize  = 2 + 4 + 8 + 4 // version, crc, offset, producer count
	snapshotCRCStart    = 6             // the CRC covers bytes 6..end
	snapshotEntryFixed  = 8 + 2 + 4 + 8 + 8 + 1
	snapshotBatchSize   = 4 + 4 + 8 + 8 + 8
	maxSnapshotFileSize = 256 << 20 // bound before reading a snapshot
)

var errBadSnapshot = errors.New("hotlog: bad producer snapshot")

// encodeProducerSnapshot encodes the table as of offset, producers sorted
// by id so that equal tables give equal bytes.
func encodeProducerSnapshot(offset int64, t *producerTable) []byte {
	ids := make([]int64, 0, len(t.entries))
	for id := range t.entries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	be := binary.BigEndian
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(ids)*(snapshotEntryFixed+2*snapshotBatchSize))
	be.PutUint16(b, snapshotVersion)
	be.PutUint64(b[6:], uint64(offset))
	be.PutUint32(b[14:], uint32(len(ids)))
	for _, id := range ids {
		e := t.entries[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.currentTxnFirstOffset))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = append(b, byte(e.n))
		for _, pb := range e.batches[:e.n] {
			b = be.AppendUint32(b, uint32(pb.firstSeq))
			b = be.AppendUint32(b, uint32(pb.lastSeq))
			b = be.AppendUint64(b, uint64(pb.baseOffset))
			b = be.AppendUint64(b, uint64(pb.lastOffset))
			b = be.AppendUint64(b, uint64(pb.maxTimestamp))
		}
	}
	be.PutUint32(b[2:], recordbatch.Checksum(b[snapshotCRCStart:]))
	return b
}

// decodeProducerSnapshot parses a snapshot, checking the version, the CRC,
// every count against the bytes present, and the invariants (ids
// increasing, batch offsets increasing and below the snapshot's offset).
func decodeProducerSnapshot(b []byte) (int64, producerTable, error) {
	be := binary.BigEndian
	if len(b) < snapshotHeaderSize {
		return 0, producerTable{}, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(b))
	}
	if v := be.Uint16(b); v != snapshotVersion {
		return 0, producerTable{}, fmt.Errorf("%w: version %d", errBadSnapshot, v)
	}
	if want, got := be.Uint32(b[2:]), recordbatch.Checksum(b[snapshotCRCStart:]); want != got {
		return 0, producerTable{}, fmt.Errorf("%w: crc %08x, computed %08x", errBadSnapshot, want, got)
	}
	offset, count := int64(be.Uint64(b[6:])), be.Uint32(b[14:])
	if offset < 0 || offset > maxOffset || int64(count) > int64(len(b)-snapshotHeaderSize)/snapshotEntryFixed {
		return 0, producerTable{}, fmt.Errorf("%w: offset %d, %d producers in %d bytes", errBadSnapshot, offset, count, len(b))
	}
	t := producerTable{entries: make(map[int64]*producerEntry, count)}
	rest, lastID := b[snapshotHeaderSize:], int64(-1)
	for range count {
		id, e, n, err := decodeSnapshotEntry(rest, offset)
		if err != nil {
			return 0, producerTable{}, err
		}
		if id <= lastID {
			return 0, producerTable{}, fmt.Errorf("%w: producer id %d after %d", errBadSnapshot, id, lastID)
		}
		t.entries[id], lastID, rest = e, id, rest[n:]
	}
	if len(rest) != 0 {
		return 0, producerTable{}, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(rest))
	}
	return offset, t, nil
}

// decodeSnapshotEntry parses one producer entry; n is the bytes it used.
func decodeSnapshotEntry(b []byte, snapshotOffset int64) (id int64, e *producerEntry, n int, err error) {
	be := binary.BigEndian
	if len(b) < snapshotEntryFixed {
		return 0, nil, 0, fmt.Errorf("%w: truncated entry", errBadSnapshot)
	}
	e = &producerEntry{}
	id = int64(be.Uint64(b))
	e.epoch = int16(be.Uint16(b[8:]))
	e.coordinatorEpoch = int32(be.Uint32(b[10:]))
	e.currentTxnFirstOffset = int64(be.Uint64(b[14:]))
	e.lastTimestamp = int64(be.Uint64(b[22:]))
	e.n = int(b[30])
	n = snapshotEntryFixed + e.n*snapshotBatchSize
	if id < 0 || e.n > maxProducerBatches || len(b) < n || e.currentTxnFirstOffset < noOffset || e.currentTxnFirstOffset >= snapshotOffset {
		return 0, nil, 0, fmt.Errorf("%w: entry of producer %d", errBadSnapshot, id)
	}
	prevLast := int64(-1)
	for i := range e.n {
		p := b[snapshotEntryFixed+i*snapshotBatchSize:]
		pb := producerBatch{firstSeq: int32(be.Uint32(p)), lastSeq: int32(be.Uint32(p[4:])),
			baseOffset: int64(be.Uint64(p[8:])), lastOffset: int64(be.Uint64(p[16:])), maxTimestamp: int64(be.Uint64(p[24:]))}
		if pb.baseOffset <= prevLast || pb.lastOffset < pb.baseOffset || pb.lastOffset >= snapshotOffset {
			return 0, nil, 0, fmt.Errorf("%w: batch offsets of producer %d", errBadSnapshot, id)
		}
		e.batches[i], prevLast = pb, pb.lastOffset
	}
	return id, e, n, nil
}

// listSnapshots returns the offsets of the snapshot files in dir, ascending.
func listSnapshots(dir string) ([]int64, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offsets []int64
	for _, e := range names {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) || len(name) != 20+len(snapshotSuffix) {
			continue
		}
		if off, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64); err == nil && off >= 0 {
			offsets = append(offsets, off)
		}
	}
	slices.Sort(offsets)
	return offsets, nil
}

// readSnapshot reads and decodes the snapshot at offset.
func readSnapshot(dir string, offset int64) (producerTable, error) {
	path := segmentFileName(dir, offset, snapshotSuffix)
	st, err := os.Stat(path)
	if err != nil {
		return producerTable{}, err
	}
	if st.Size() > maxSnapshotFileSize {
		return producerTable{}, fmt.Errorf("%w: %d bytes", errBadSnapshot, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return producerTable{}, err
	}
	got, t, err := decodeProducerSnapshot(data)
	if err == nil && got != offset {
		err = fmt.Errorf("%w: holds offset %d", errBadSnapshot, got)
	}
	return t, err
}

// removeSnapshots deletes the snapshots keep rejects.
func removeSnapshots(dir string, keep func(offset int64) bool) error {
	offsets, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	for _, off := range offsets {
		if keep(off) {
			continue
		}
		if err := os.Remove(segmentFileName(dir, off, snapshotSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeProducerSnapshot writes the table as of the LEO (the active
// segment's base at a roll). A failure is logged, not fatal: the snapshot
// only shortens recovery, which falls back to an older one.
// REQUIRES: appendMu held.
func (l *Log) writeProducerSnapshot(offset int64) {
	data := encodeProducerSnapshot(offset, &l.producers)
	name := filepath.Base(segmentFileName(l.dir, offset, snapshotSuffix))
	if err := writeFileAtomic(l.dir, name, data); err != nil {
		l.logger.Warn("hotlog: producer snapshot not written", "dir", l.dir, "offset", offset, "err", err)
	}
}

// rebuildProducersLocked rebuilds the table for the log as it is now: it
// deletes snapshots past the LEO, loads the newest good one at or below it
// (deleting corrupt ones, with a warning) and applies the batch headers
// from there to the LEO, then expires old producers.
// REQUIRES: appendMu and mu held (or the log unpublished, during Open).
func (l *Log) rebuildProducersLocked() error {
	leo := l.leoLocked()
	if err := removeSnapshots(l.dir, func(off int64) bool { return off <= leo }); err != nil {
		return err
	}
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	// A bad aborted-transaction index is re-derived from a snapshot at or
	// below its segment.
	limit, err := l.loadTxnIndexesLocked()
	if err != nil {
		return err
	}
	table, from := newProducerTable(), int64(0)
	for i := len(offsets) - 1; i >= 0; i-- {
		if offsets[i] > limit {
			continue
		}
		t, err := readSnapshot(l.dir, offsets[i])
		if err == nil {
			table, from = t, offsets[i]
			break
		}
		l.logger.Warn("hotlog: ignoring bad producer snapshot; rebuilding from an older one or the log",
			"dir", l.dir, "offset", offsets[i], "err", err)
		if rerr := os.Remove(segmentFileName(l.dir, offsets[i], snapshotSuffix)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return rerr
		}
	}
	l.producers = table
	changed := l.trimTxnIndexesLocked(from)
	if err := l.scanProducersFromLocked(from, changed); err != nil {
		return err
	}
	if err := l.writeChangedTxnIndexesLocked(changed); err != nil {
		return err
	}
	l.producers.touchAll(l.now().UnixMilli())
	l.producers.expire(l.now().UnixMilli(), l.mu.cfg.producerIDExpiration())
	l.mu.firstUnstable = l.producers.firstUnstable(noOffset)
	return nil
}

// scanProducersFromLocked applies the headers of every batch at or after
// from to the table (header-only reads). REQUIRES: as rebuildProducersLocked.
func (l *Log) scanProducersFromLocked(from int64, changed map[*segment]bool) error {
	for _, s := range l.mu.segments[l.segmentForLocked(from):] {
		if s.next <= from {
			continue
		}
		pos, _, found, err := s.findBatch(from)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		err = s.forEachHeader(pos, func(bpos int64, h recordbatch.Header) bool {
			if h.BaseOffset >= from {
				l.applyScannedLocked(s, bpos, h, changed)
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// dropSnapshotsBelowLogStart deletes snapshots no longer needed once the log
// start moved: every one older than the newest at or below the log start.
// REQUIRES: appendMu held.
func (l *Log) dropSnapshotsBelowLogStart() error {
	start := l.LogStartOffset()
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	keepFrom := int64(-1)
	for _, off := range offsets {
		if off <= start {
			keepFrom = off
		}
	}
	return removeSnapshots(l.dir, func(off int64) bool { return off >= keepFrom })
}

// ErrBadProducerSnapshot: encoded producer-state bytes (a snapshot file, or
// the producer-snapshot section of a tiered object) failed to decode.
var ErrBadProducerSnapshot = errBadSnapshot

// CheckProducerSnapshot decodes b, a producer snapshot in the format of
// doc.go ("Producer-state snapshots"), and returns the offset it is as of.
// It checks everything decoding checks (version, CRC, bounds, invariants);
// errors wrap ErrBadProducerSnapshot. Nothing in b can make it panic.
func CheckProducerSnapshot(b []byte) (int64, error) {
	if len(b) > maxSnapshotFileSize {
		return 0, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(b))
	}
	offset, _, err := decodeProducerSnapshot(b)
	return offset, err
}

// ProducerSnapshotAt returns the encoded snapshot file for exactly offset
// (written at the roll that made offset a segment base, or at a clean
// Close), after checking that it decodes and is as of offset. ok is false
// when there is none (never written, deleted by retention, or bad). The
// file is replaced only by atomic rename, so no lock is needed: a
// concurrent deletion reads as absent.
func (l *Log) ProducerSnapshotAt(offset int64) ([]byte, bool) {
	if offset < 0 || offset > maxOffset {
		return nil, false
	}
	data, err := readBoundedFile(segmentFileName(l.dir, offset, snapshotSuffix), maxSnapshotFileSize)
	if err != nil {
		return nil, false
	}
	got, err := CheckProducerSnapshot(data)
	if err != nil || got != offset {
		l.logger.Warn("hotlog: producer snapshot unusable", "dir", l.dir, "offset", offset, "holds", got, "err", err)
		return nil, false
	}
	return data, true
}

// readBoundedFile reads path, refusing files larger than limit before
// allocating for them.
func readBoundedFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes", errBadSnapshot, st.Size())
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, err
	}
	return data, nil
}
