package hotlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// recoveryCheckpointInterval rate-limits recovery-point checkpoints written by
// the flusher (each costs two fsyncs). Close always writes one.
const recoveryCheckpointInterval = 5 * time.Second

// Log is one partition's local log: an ordered set of segments, the active
// one last. Safe for concurrent use: appends are serialized, reads run in
// parallel with appends.
type Log struct {
	dir        string
	logger     *slog.Logger
	now        func() time.Time
	durability Durability // fixed at Open

	// syncFile makes a file's data durable; a seam for fault-injection tests.
	// Set before the first Append; read only by flush rounds.
	syncFile func(*os.File) error

	appendMu sync.Mutex // serializes writers: Append, Truncate, retention, Close
	flushMu  sync.Mutex // held by a flush round and by whoever closes or truncates files

	flusher flushDriver // set at Open, stopped at Close

	// producers is the idempotent-producer state (producers.go). Guarded
	// by appendMu: every writer holds it, and so does every reader.
	producers producerTable

	// corruptReads counts reads that met damage; readers hold only mu.RLock.
	corruptReads atomic.Int64

	// cleaner is the compaction state: the replace lock, the cleaner
	// checkpoint, the open cleaned-segment writers (clean_checkpoint.go).
	cleaner cleanerState

	// mu guards the published state. Held briefly, never across fsync.
	// Lock order: appendMu, flushMu, mu.
	mu struct {
		sync.RWMutex
		cfg      Config
		segments []*segment // by base offset; never empty while open; last is active
		// unsynced are segments sealed since the last flush round.
		unsynced       []*segment
		logStartOffset int64
		flushedOffset  int64 // DurabilityFsync only; <= LEO
		recoveryPoint  int64 // <= flushedOffset
		lastCheckpoint time.Time
		epochs         epochCache
		err            error // sticky storage failure, wraps ErrStorage
		closed         bool
		changed        chan struct{} // closed and replaced on every change
		stats          Stats
		// firstUnstable is the first offset of the earliest open
		// transaction (-1: none); published with the LEO (txn.go).
		firstUnstable int64
	}
}

// Stats is a snapshot of the log's counters.
type Stats struct {
	Appends            int64 // Append calls that wrote data
	AppendedBytes      int64
	Fsyncs             int64 // fdatasync calls on segment and index files
	FlushRounds        int64 // group-commit rounds
	Rolls              int64
	SegmentsDeleted    int64
	SegmentsReplaced   int64 // old segments swapped out by ReplaceSegments (compaction)
	CorruptReads       int64 // reads that met a batch failing its CRC
	RecoveryTruncation int64 // bytes cut off by recovery at Open
	Segments           int
	Size               int64
}

// Stats returns a snapshot of the counters.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.mu.stats
	s.Segments = len(l.mu.segments)
	s.Size = l.sizeLocked()
	s.CorruptReads = l.corruptReads.Load()
	return s
}

func (l *Log) activeLocked() *segment { return l.mu.segments[len(l.mu.segments)-1] }

func (l *Log) leoLocked() int64 { return l.activeLocked().next }

// notifyLocked wakes Changed() listeners. REQUIRES: mu held exclusively.
func (l *Log) notifyLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// fail makes err sticky and wakes waiters. The first failure wins.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(err)
}

func (l *Log) failLocked(err error) error {
	if l.mu.err == nil {
		l.mu.err = fmt.Errorf("%w: %w", ErrStorage, err)
		l.logger.Error("hotlog: storage failure, log fenced until reopened", "dir", l.dir, "err", err)
		l.notifyLocked()
	}
	return l.mu.err
}

// usableLocked returns why the log cannot be used, or nil.
func (l *Log) usableLocked() error {
	if l.mu.closed {
		return ErrClosed
	}
	return l.mu.err
}

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.logStartOffset
}

// LogEndOffset (LEO) is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leoLocked()
}

// FlushedOffset is the end of the durable prefix: every offset below it is on
// stable storage (DurabilityFsync) or equals LogEndOffset (DurabilityReplication).
func (l *Log) FlushedOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.flushedLocked()
}

func (l *Log) flushedLocked() int64 {
	if l.durability == DurabilityReplication {
		return l.leoLocked()
	}
	return l.mu.flushedOffset
}

// Changed returns a channel closed the next time LogEndOffset, FlushedOffset
// or LogStartOffset changes (long-poll waiters select on it, then call again).
// It is also closed when the log fails or closes.
func (l *Log) Changed() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.changed
}

// WaitFlushed blocks until FlushedOffset() > offset, the context ends, or the
// log fails (ErrStorage). With DurabilityReplication it returns at once.
func (l *Log) WaitFlushed(ctx context.Context, offset int64) error {
	if l.durability == DurabilityReplication {
		return nil
	}
	for {
		l.mu.RLock()
		flushed, err, ch := l.mu.flushedOffset, l.mu.err, l.mu.changed
		closed := l.mu.closed
		l.mu.RUnlock()
		switch {
		case flushed > offset:
			return nil
		case err != nil:
			return err
		case closed:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LatestEpoch returns the leader epoch of the last batch, or -1 if empty.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.latest()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the leader-epoch
// checkpoint, with Kafka's semantics: the latest epoch ends at the LEO; for an
// older known epoch, the largest epoch <= epoch and the start offset of the
// next larger one; an epoch older than every known one gives (epoch, start of
// the first known); an epoch newer than all, or no epochs, gives (-1, -1).
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.endOffsetFor(epoch, l.leoLocked())
}

// Size is the total bytes of all segment .log files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sizeLocked()
}

func (l *Log) sizeLocked() int64 {
	var n int64
	for _, s := range l.mu.segments {
		n += s.size
	}
	return n
}

// segmentForLocked returns the index of the segment holding offset: the last
// one whose base is <= offset. REQUIRES: mu held.
func (l *Log) segmentForLocked(offset int64) int {
	segs := l.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return max(i-1, 0)
}
