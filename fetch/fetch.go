package fetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// Sentinel errors in Result.Err. The broker maps them to Kafka codes.
var (
	// ErrOffsetOutOfRange: the fetch offset is below the log start or above the LEO.
	ErrOffsetOutOfRange = errors.New("fetch: offset out of range") // OFFSET_OUT_OF_RANGE
	// ErrRead wraps a failure of Partition.Read other than out-of-range.
	ErrRead = errors.New("fetch: read failed")
	// ErrInvalidConfig is returned by Config.Validate.
	ErrInvalidConfig = errors.New("fetch: invalid config")
)

// DefaultMaxResponseBytes is Kafka's default fetch.max.bytes (55 MiB).
const DefaultMaxResponseBytes = 55 << 20

// Config configures a Fetcher. The zero value is usable.
type Config struct {
	// MaxResponseBytes caps Request.MaxBytes (Kafka's broker-side
	// fetch.max.bytes), bounding the memory one response can hold apart from
	// a single KIP-74 oversized batch. Default DefaultMaxResponseBytes.
	MaxResponseBytes int
	// ColdGrace is how long the first pass waits for the fetch's cold reads
	// before reading hot partitions (capped by the request's MaxWait): long
	// enough for a cold read served from the cold cache, so that a consumer
	// whose hot partitions always have data still gets its cold ones. See
	// the package doc, "Cold reads". Default DefaultColdGrace; < 0: none.
	ColdGrace time.Duration
}

// DefaultColdGrace is Config.ColdGrace's default.
const DefaultColdGrace = 20 * time.Millisecond

// Validate rejects nonsense; zero values are allowed and mean "default".
func (c Config) Validate() error {
	if c.MaxResponseBytes < 0 {
		return fmt.Errorf("%w: MaxResponseBytes %d < 0", ErrInvalidConfig, c.MaxResponseBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.ColdGrace == 0 {
		c.ColdGrace = DefaultColdGrace
	}
	return c
}

// IsolationLevel is the Kafka isolation level of a fetch.
type IsolationLevel int8

const (
	ReadUncommitted IsolationLevel = 0
	ReadCommitted   IsolationLevel = 1
)

// Positions is a snapshot of a partition's offsets (see the package doc).
// Invariant: LogStart <= HighWatermark, LastStable <= HighWatermark <= LogEnd.
type Positions struct {
	LogStart      int64
	LastStable    int64
	HighWatermark int64
	LogEnd        int64
}

// Partition is one readable partition as the fetch planner sees it. The
// broker adapts its local partitions; a tier-aware implementation
// serves offsets below the local log start from the bucket.
type Partition interface {
	// Changed returns a channel closed the next time the HW, LEO or log
	// start moves. Fetch calls it before Positions so no move is missed.
	Changed() <-chan struct{}
	// Positions returns the current offsets.
	Positions() Positions
	// Read returns whole batches, verbatim, starting with the batch that
	// holds offset and ending before upTo, at most maxBytes except that the
	// first batch is returned even if larger (KIP-74). It fails with an
	// error wrapping hotlog.ErrOffsetOutOfRange if offset is not in the log.
	Read(offset int64, maxBytes int, upTo int64) ([]byte, error)
}

// PartitionRequest is one partition of a fetch.
type PartitionRequest struct {
	// Partition to read, or nil for a partition the caller already answers
	// with an error (unknown topic, fenced epoch, ...): it is never read,
	// and, as in Kafka, its presence completes the fetch at once.
	Partition Partition
	// Offset is the fetch offset.
	Offset int64
	// MaxBytes bounds this partition's records (partition_max_bytes).
	MaxBytes int
}

// Request is the data part of one Fetch request.
type Request struct {
	// MinBytes: answer as soon as this many bytes can be returned.
	MinBytes int
	// MaxBytes bounds the records of the whole response (capped by
	// Config.MaxResponseBytes).
	MaxBytes int
	// MaxWait bounds the long poll. <= 0: answer at once.
	MaxWait   time.Duration
	Isolation IsolationLevel
	// Partitions in request order; Fetch answers in the same order.
	Partitions []PartitionRequest
}

// Result is the answer for one PartitionRequest.
type Result struct {
	// Err is nil, ErrOffsetOutOfRange, or wraps ErrRead. Always nil for a
	// PartitionRequest with a nil Partition (the caller owns that answer).
	Err error
	// Offsets at the time of the read that produced Records. -1 when the
	// partition was not read.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Records holds whole batches, never nil (empty when nothing to return:
	// some clients read a null record set as corrupt).
	Records []byte
	// AbortedTxns (read_committed only) are the aborted transactions
	// overlapping Records' offsets, from a TxnPartition; nil otherwise.
	AbortedTxns []hotlog.AbortedTxn
}

// TxnPartition is a Partition that knows its aborted transactions. A
// read_committed fetch asks it for those overlapping the returned records.
type TxnPartition interface {
	// AbortedTxns returns the aborts overlapping [from, to) (hotlog's
	// AbortedTxns contract). It must not block on the bucket.
	AbortedTxns(from, to int64) []hotlog.AbortedTxn
}

// Fetcher answers fetches. It holds no per-request state and is safe for
// concurrent use.
type Fetcher struct {
	cfg Config
}

// New returns a Fetcher with cfg's defaults applied.
func New(cfg Config) (*Fetcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Fetcher{cfg: cfg.withDefaults()}, nil
}

// Fetch reads every requested partition, long-polling as the package doc
// describes, and returns one Result per PartitionRequest in order. It
// returns early with the latest results when ctx ends.
func (f *Fetcher) Fetch(ctx context.Context, req Request) []Result {
	req.MaxBytes = min(max(req.MaxBytes, 0), f.cfg.MaxResponseBytes)
	var timer *time.Timer
	var expired <-chan time.Time
	if req.MaxWait > 0 {
		timer = time.NewTimer(req.MaxWait)
		defer timer.Stop()
		expired = timer.C
	}
	coldCtx, cancelCold := context.WithCancel(ctx)
	defer cancelCold()
	cold := f.startCold(coldCtx, req)
	if len(pendingChannels(cold)) > 0 && hotFirst(cold) {
		// Hot first: data the hot partitions already have is not held
		// back for a cold read waiting on the bucket.
		if results, pass := f.readAll(req, cold); pass.complete(req) {
			return results
		}
	}
	f.coldGrace(ctx, cold, min(f.cfg.ColdGrace, req.MaxWait))
	for {
		// Changed channels first: a move after this point closes one of
		// them, so the wait below cannot sleep through it. A cold read
		// finishing wakes the wait too.
		wake := append(f.changedChannels(req), pendingChannels(cold)...)
		results, pass := f.readAll(req, cold)
		if pass.complete(req) || expired == nil {
			return results
		}
		if !waitAny(ctx, wake, expired) {
			// Timed out or ctx ended: answer with a fresh read, as Kafka
			// answers with whatever is there when max.wait passes.
			results, _ = f.readAll(req, cold)
			return results
		}
	}
}

// changedChannels collects the Changed channel of every readable partition.
func (f *Fetcher) changedChannels(req Request) []<-chan struct{} {
	chans := make([]<-chan struct{}, 0, len(req.Partitions))
	for _, pr := range req.Partitions {
		if pr.Partition != nil {
			chans = append(chans, pr.Partition.Changed())
		}
	}
	return chans
}
