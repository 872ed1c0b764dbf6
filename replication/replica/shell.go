package replica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

// TickInterval is how often every replica should get Tick (ISR shrink and
// acks=all timeouts run on logical time); the missed-progress safety net
// measures in it.
const TickInterval = 100 * time.Millisecond

// ISRStore is the part of the metadata store ISR changes need.
type ISRStore interface {
	// CASPartitionState writes want if the stored state's version is
	// want.Version and returns the new version; metadata.ErrCASFailed
	// when it is not.
	CASPartitionState(ctx context.Context, id metadata.TopicID, index int32, want metadata.PartitionState) (int64, error)
	// PartitionStates reads a topic's partition states.
	PartitionStates(ctx context.Context, id metadata.TopicID) ([]metadata.PartitionState, error)
}

// ShellConfig is the broker-wide configuration of the shell.
type ShellConfig struct {
	// ReplicaID is this broker's node id.
	ReplicaID int32
	// LagTimeMax is replica.lag.time.max.ms (at least 1ms is used).
	LagTimeMax time.Duration
	// Fsync: the logs run with fsync durability (the leader counts only
	// flushed data as its own LEO).
	Fsync bool
	// Store receives ISR changes.
	Store ISRStore
	// Lifetime ends when the broker stops: log watchers and ISR writers end.
	Lifetime context.Context
	Logger   *slog.Logger
}

// Shell is the broker-wide part of the replication shell. Init it before
// the first New; its zero value is otherwise ready.
type Shell struct {
	cfg ShellConfig // set by Init, read-only after

	acks AckPurgatory
	// bg counts the shell's goroutines (log watchers, ISR CAS writers);
	// they end with the lifetime and WaitBackground waits for them.
	bg sync.WaitGroup
	// missedProgress counts the tick's reports of log progress the watcher
	// had not reported for a whole tick (reportMissedProgressLocked).
	missedProgress atomic.Uint64
}

// Init sets the broker-wide configuration. REQUIRES: no Core made yet.
func (s *Shell) Init(cfg ShellConfig) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Lifetime == nil {
		cfg.Lifetime = context.Background()
	}
	s.cfg = cfg
}

// Acks is the acks=all purgatory of every partition.
func (s *Shell) Acks() *AckPurgatory { return &s.acks }

// Go runs fn on a goroutine the shell waits for in WaitBackground.
func (s *Shell) Go(fn func()) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn()
	}()
}

// WaitBackground waits for the shell's goroutines, at most d (a goroutine
// that ignores the lifetime must not hang shutdown).
func (s *Shell) WaitBackground(d time.Duration) {
	done := make(chan struct{})
	go func() {
		s.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// Stats are the shell's broker-wide counters.
type Stats struct {
	// MissedProgress counts leader log progress (an append or a flush)
	// that the log watcher had not reported to the replica for a whole
	// tick, so that the tick's safety net reported it: each is a wake-up
	// that acks=all producers and long polls waited for in vain.
	MissedProgress uint64
}

// Stats returns the shell's counters.
func (s *Shell) Stats() Stats { return Stats{MissedProgress: s.missedProgress.Load()} }

// MinInsync bounds a topic's min.insync.replicas to what the machine accepts.
func MinInsync(cfg metadata.TopicConfig) int {
	return int(min(max(cfg.MinInsyncReplicas, 1), replication.MaxReplicas))
}
