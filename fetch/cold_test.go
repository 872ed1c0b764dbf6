package fetch

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeColdPartition serves offsets below localStart through ReadCold, which
// waits for release (the bucket answering) or ctx.
type fakeColdPartition struct {
	*fakePartition
	localStart int64
	release    chan struct{}
	coldErr    error
	coldCalls  chan int64
}

var _ ColdPartition = (*fakeColdPartition)(nil)

func newFakeCold(batches int, localStart int64) *fakeColdPartition {
	p := &fakeColdPartition{fakePartition: newFakePartition(100), localStart: localStart,
		release: make(chan struct{}), coldCalls: make(chan int64, 16)}
	p.append(batches, true)
	return p
}

func (p *fakeColdPartition) IsCold(offset int64) bool { return offset < p.localStart }

func (p *fakeColdPartition) ReadCold(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	p.coldCalls <- offset
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.coldErr != nil {
		return nil, p.coldErr
	}
	return p.fakePartition.Read(offset, maxBytes, min(upTo, p.localStart))
}

// Read must never be used for cold offsets.
func (p *fakeColdPartition) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	if p.IsCold(offset) {
		return nil, errors.New("hot read of a cold offset")
	}
	return p.fakePartition.Read(offset, maxBytes, upTo)
}

func newTestFetcher(t *testing.T) *Fetcher {
	f, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestColdDoesNotHoldUpHot: a fetch of a hot and a stalled cold partition
// answers at once with the hot data (MinBytes satisfied).
func TestColdDoesNotHoldUpHot(t *testing.T) {
	hot := newFakePartition(100)
	hot.append(3, true)
	cold := newFakeCold(10, 5)
	start := time.Now()
	res := newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 5 * time.Second,
		Partitions: []PartitionRequest{{Partition: cold, Offset: 0, MaxBytes: 1000}, {Partition: hot, Offset: 0, MaxBytes: 1000}}})
	if time.Since(start) > 2*time.Second {
		t.Fatalf("hot answer waited %v for the bucket", time.Since(start))
	}
	if len(res[1].Records) != 300 || len(res[0].Records) != 0 || res[0].Err != nil {
		t.Fatalf("hot %d bytes, cold %d bytes err %v", len(res[1].Records), len(res[0].Records), res[0].Err)
	}
	if got := <-cold.coldCalls; got != 0 {
		t.Fatalf("cold read at %d", got)
	}
}

// TestColdOnlyWaitsForBucket: with only cold partitions, the fetch answers
// when the cold read finishes, with its data, before MaxWait.
func TestColdOnlyWaitsForBucket(t *testing.T) {
	cold := newFakeCold(10, 5)
	go func() {
		<-cold.coldCalls
		time.Sleep(50 * time.Millisecond)
		close(cold.release)
	}()
	start := time.Now()
	res := newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 10 * time.Second,
		Partitions: []PartitionRequest{{Partition: cold, Offset: 2, MaxBytes: 1 << 20}}})
	if time.Since(start) > 5*time.Second {
		t.Fatalf("waited %v", time.Since(start))
	}
	// Offsets 2..4 come from the bucket, the cold read stops at the local start.
	if res[0].Err != nil || len(res[0].Records) != 300 {
		t.Fatalf("got %d bytes, %v", len(res[0].Records), res[0].Err)
	}
}

// TestColdMaxWaitExpires: a bucket that never answers gives an empty,
// error-free answer at MaxWait, and the read is cancelled.
func TestColdMaxWaitExpires(t *testing.T) {
	cold := newFakeCold(10, 5)
	res := newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond,
		Partitions: []PartitionRequest{{Partition: cold, Offset: 0, MaxBytes: 1 << 20}}})
	if res[0].Err != nil || len(res[0].Records) != 0 || res[0].HighWatermark != 10 {
		t.Fatalf("%+v", res[0])
	}
}

// TestColdErrorAnswersAtOnce: a failed cold read is the partition's error.
func TestColdErrorAnswersAtOnce(t *testing.T) {
	cold := newFakeCold(10, 5)
	cold.coldErr = errors.New("corrupt")
	close(cold.release)
	res := newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1 << 20, MaxBytes: 1 << 20, MaxWait: 10 * time.Second,
		Partitions: []PartitionRequest{{Partition: cold, Offset: 0, MaxBytes: 1 << 20}}})
	if !errors.Is(res[0].Err, ErrRead) {
		t.Fatalf("err %v", res[0].Err)
	}
}

// TestColdOutOfRangeAndHotOffsets: below the log start is out of range
// without a cold read; at or above the local start reads the hot log.
func TestColdOutOfRangeAndHotOffsets(t *testing.T) {
	cold := newFakeCold(10, 5)
	cold.mu.Lock()
	cold.mu.logStart = 2
	cold.mu.Unlock()
	f := newTestFetcher(t)
	res := f.Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []PartitionRequest{{Partition: cold, Offset: 1, MaxBytes: 1 << 20}, {Partition: cold, Offset: 7, MaxBytes: 1 << 20}}})
	if !errors.Is(res[0].Err, ErrOffsetOutOfRange) || res[1].Err != nil || len(res[1].Records) != 300 {
		t.Fatalf("%v / %v %d", res[0].Err, res[1].Err, len(res[1].Records))
	}
	if len(cold.coldCalls) != 0 {
		t.Fatal("cold read started for an out-of-range offset")
	}
}

// TestColdKIP74Budget: the cold answer obeys the response budget like a hot
// one: after a hot partition filled it, the cold first batch does not fit.
func TestColdKIP74Budget(t *testing.T) {
	hot := newFakePartition(100)
	hot.append(3, true)
	cold := newFakeCold(10, 5)
	close(cold.release)
	res := newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1 << 20, MaxBytes: 350, MaxWait: 200 * time.Millisecond,
		Partitions: []PartitionRequest{{Partition: hot, Offset: 0, MaxBytes: 1000}, {Partition: cold, Offset: 0, MaxBytes: 1000}}})
	if len(res[0].Records) != 300 || len(res[1].Records) != 0 {
		t.Fatalf("hot %d, cold %d", len(res[0].Records), len(res[1].Records))
	}
	res = newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1 << 20, MaxBytes: 50, MaxWait: 200 * time.Millisecond,
		Partitions: []PartitionRequest{{Partition: cold, Offset: 0, MaxBytes: 50}}})
	if len(res[0].Records) != 100 {
		t.Fatalf("KIP-74 first cold batch: %d bytes", len(res[0].Records))
	}
}

// TestColdCachedReadRidesAlong: a cold read that finishes at once (a cold
// cache hit) is in the first answer next to hot data, so a consumer whose
// hot partitions always have data still gets its cold ones.
func TestColdCachedReadRidesAlong(t *testing.T) {
	hot := newFakePartition(100)
	hot.append(3, true)
	cold := newFakeCold(10, 5)
	close(cold.release)
	res := newTestFetcher(t).Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 5 * time.Second,
		Partitions: []PartitionRequest{{Partition: hot, Offset: 0, MaxBytes: 1000}, {Partition: cold, Offset: 0, MaxBytes: 1000}}})
	if len(res[0].Records) != 300 || len(res[1].Records) != 500 {
		t.Fatalf("hot %d bytes, cold %d bytes", len(res[0].Records), len(res[1].Records))
	}
}

// fakeCachedCold is a fakeColdPartition with a cache: ReadColdCached hits
// once a ReadCold finished (its GETs landed in the cache).
type fakeCachedCold struct {
	*fakeColdPartition
	cached chan struct{} // closed once the cache holds the cold bytes
}

var _ ColdCachedPartition = (*fakeCachedCold)(nil)

func (p *fakeCachedCold) ReadColdCached(_ context.Context, offset int64, maxBytes int, upTo int64) ([]byte, bool) {
	select {
	case <-p.cached:
		data, err := p.fakePartition.Read(offset, maxBytes, min(upTo, p.localStart))
		return data, err == nil
	default:
		return nil, false
	}
}

// TestHotFirstThenCachedCold: a fetch whose hot partition has data answers
// without waiting for a cold read that missed the cache, however long the
// cold grace; once the bucket's bytes are cached, the next fetch carries
// them, read in line, without ReadCold.
func TestHotFirstThenCachedCold(t *testing.T) {
	hot := newFakePartition(100)
	hot.append(3, true)
	cold := &fakeCachedCold{fakeColdPartition: newFakeCold(10, 5), cached: make(chan struct{})}
	f, err := New(Config{ColdGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Hour,
		Partitions: []PartitionRequest{{Partition: hot, Offset: 0, MaxBytes: 1000}, {Partition: cold, Offset: 0, MaxBytes: 1000}}}
	answered := make(chan []Result, 1)
	go func() { answered <- f.Fetch(context.Background(), req) }()
	select {
	case res := <-answered:
		if len(res[0].Records) != 300 || len(res[1].Records) != 0 {
			t.Fatalf("hot %d bytes, cold %d bytes; want the hot ones alone", len(res[0].Records), len(res[1].Records))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hot data waited for a cold read that missed the cache")
	}
	<-cold.coldCalls // the miss went to the bucket
	close(cold.cached)
	res := f.Fetch(context.Background(), req)
	if len(res[0].Records) != 300 || len(res[1].Records) != 500 {
		t.Fatalf("hot %d bytes, cold %d bytes; want both", len(res[0].Records), len(res[1].Records))
	}
	select {
	case off := <-cold.coldCalls:
		t.Fatalf("a cached cold read went to the bucket (offset %d)", off)
	default:
	}
}
