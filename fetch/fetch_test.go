package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// fakeBatch builds a batch-shaped blob: baseOffset, length, then filler so
// the whole batch is size bytes. Only the framing matters to the planner.
func fakeBatch(base int64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-batchLengthEnd))
	return b
}

// fakePartition is an in-memory Partition: one record per batch, offsets
// 0..n-1, each batch of a fixed size.
type fakePartition struct {
	mu struct {
		sync.Mutex
		batches  [][]byte // batches[i] holds offset i
		logStart int64
		hw       int64
		changed  chan struct{}
	}
	batchSize int
}

var _ Partition = (*fakePartition)(nil)

func newFakePartition(batchSize int) *fakePartition {
	p := &fakePartition{batchSize: batchSize}
	p.mu.changed = make(chan struct{})
	return p
}

// append adds n batches and moves the HW past them if commit.
func (p *fakePartition) append(n int, commit bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		p.mu.batches = append(p.mu.batches, fakeBatch(int64(len(p.mu.batches)), p.batchSize))
	}
	if commit {
		p.mu.hw = int64(len(p.mu.batches))
	}
	p.notifyLocked()
}

func (p *fakePartition) notifyLocked() {
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
}

func (p *fakePartition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.changed
}

func (p *fakePartition) Positions() Positions {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Positions{LogStart: p.mu.logStart, LastStable: p.mu.hw, HighWatermark: p.mu.hw, LogEnd: int64(len(p.mu.batches))}
}

func (p *fakePartition) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if offset < p.mu.logStart || offset > int64(len(p.mu.batches)) {
		return nil, hotlog.ErrOffsetOutOfRange
	}
	var out []byte
	for o := offset; o < upTo; o++ {
		if len(out) > 0 && len(out)+p.batchSize > maxBytes {
			break
		}
		out = append(out, p.mu.batches[o]...)
	}
	return out, nil
}

func newFetcher(t *testing.T) *Fetcher {
	t.Helper()
	f, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFetchVisibility(t *testing.T) {
	p := newFakePartition(100)
	p.append(5, true)  // offsets 0-4 committed: HW 5
	p.append(3, false) // offsets 5-7 appended only: LEO 8
	p.mu.logStart = 2
	tests := []struct {
		offset  int64
		wantErr error
		wantLen int
	}{
		{offset: 1, wantErr: ErrOffsetOutOfRange},
		{offset: 2, wantLen: 300},
		{offset: 4, wantLen: 100},
		{offset: 5, wantLen: 0}, // at HW: empty
		{offset: 8, wantLen: 0}, // at LEO: empty
		{offset: 9, wantErr: ErrOffsetOutOfRange},
	}
	f := newFetcher(t)
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.offset), func(t *testing.T) {
			res := f.Fetch(context.Background(), Request{MaxBytes: 1 << 20, Partitions: []PartitionRequest{
				{Partition: p, Offset: tt.offset, MaxBytes: 1 << 20},
			}})
			r := res[0]
			if !errors.Is(r.Err, tt.wantErr) || (tt.wantErr == nil && r.Err != nil) {
				t.Fatalf("err = %v, want %v", r.Err, tt.wantErr)
			}
			if len(r.Records) != tt.wantLen || r.Records == nil {
				t.Fatalf("records = %d bytes (nil %v), want %d", len(r.Records), r.Records == nil, tt.wantLen)
			}
			if r.HighWatermark != 5 || r.LogStartOffset != 2 || r.LastStableOffset != 5 {
				t.Fatalf("positions hw=%d lso=%d start=%d", r.HighWatermark, r.LastStableOffset, r.LogStartOffset)
			}
		})
	}
}

func TestFetchLimits(t *testing.T) {
	tests := []struct {
		name           string
		batchSize      int
		maxBytes       int
		partitionBytes int
		want           []int // bytes returned per partition (two partitions)
	}{
		{name: "fits", batchSize: 100, maxBytes: 10000, partitionBytes: 10000, want: []int{1000, 1000}},
		{name: "partition max bytes", batchSize: 100, maxBytes: 10000, partitionBytes: 250, want: []int{200, 200}},
		{name: "response max bytes", batchSize: 100, maxBytes: 1500, partitionBytes: 10000, want: []int{1000, 500}},
		{name: "KIP-74 first batch over partition limit", batchSize: 100, maxBytes: 10000, partitionBytes: 50, want: []int{100, 0}},
		{name: "KIP-74 first batch over response limit", batchSize: 100, maxBytes: 10, partitionBytes: 10000, want: []int{100, 0}},
		{name: "response budget exhausted", batchSize: 100, maxBytes: 1000, partitionBytes: 10000, want: []int{1000, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newFakePartition(tt.batchSize), newFakePartition(tt.batchSize)
			a.append(10, true)
			b.append(10, true)
			res := newFetcher(t).Fetch(context.Background(), Request{MaxBytes: tt.maxBytes, Partitions: []PartitionRequest{
				{Partition: a, MaxBytes: tt.partitionBytes},
				{Partition: b, MaxBytes: tt.partitionBytes},
			}})
			for i, want := range tt.want {
				if got := len(res[i].Records); got != want {
					t.Errorf("partition %d: %d bytes, want %d", i, got, want)
				}
			}
		})
	}
}

func TestFetchKIP74SkipsEmptyFirstPartition(t *testing.T) {
	empty, full := newFakePartition(100), newFakePartition(100)
	full.append(3, true)
	res := newFetcher(t).Fetch(context.Background(), Request{MaxBytes: 10, Partitions: []PartitionRequest{
		{Partition: empty, MaxBytes: 10},
		{Partition: full, MaxBytes: 10},
	}})
	if len(res[0].Records) != 0 || len(res[1].Records) != 100 {
		t.Fatalf("got %d and %d bytes, want 0 and 100 (the first non-empty partition gets one batch)", len(res[0].Records), len(res[1].Records))
	}
}

func TestFetchLongPollWakesOnChange(t *testing.T) {
	p := newFakePartition(100)
	f := newFetcher(t)
	done := make(chan []Result)
	go func() {
		done <- f.Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Minute,
			Partitions: []PartitionRequest{{Partition: p, MaxBytes: 1 << 20}}})
	}()
	// An append that does not move the HW wakes the poll, which re-reads,
	// finds nothing visible and must keep waiting.
	time.Sleep(20 * time.Millisecond)
	p.append(1, false)
	select {
	case <-done:
		t.Fatal("fetch answered before the HW moved")
	case <-time.After(50 * time.Millisecond):
	}
	p.append(1, true)
	select {
	case res := <-done:
		if len(res[0].Records) != 200 || res[0].HighWatermark != 2 {
			t.Fatalf("got %d bytes hw %d, want 200 bytes hw 2", len(res[0].Records), res[0].HighWatermark)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fetch did not wake when the HW moved")
	}
}

func TestFetchLongPollMinBytesAcrossPartitions(t *testing.T) {
	a, b := newFakePartition(100), newFakePartition(100)
	f := newFetcher(t)
	done := make(chan []Result)
	go func() {
		done <- f.Fetch(context.Background(), Request{MinBytes: 250, MaxBytes: 1 << 20, MaxWait: time.Minute,
			Partitions: []PartitionRequest{{Partition: a, MaxBytes: 1 << 20}, {Partition: b, MaxBytes: 1 << 20}}})
	}()
	a.append(1, true)
	b.append(1, true)
	select {
	case <-done:
		t.Fatal("answered with 200 bytes, min is 250")
	case <-time.After(50 * time.Millisecond):
	}
	b.append(1, true)
	select {
	case res := <-done:
		if got := len(res[0].Records) + len(res[1].Records); got != 300 {
			t.Fatalf("got %d bytes, want 300", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fetch did not answer once min bytes were available")
	}
}

func TestFetchTimeout(t *testing.T) {
	p := newFakePartition(100)
	p.append(1, true)
	start := time.Now()
	res := newFetcher(t).Fetch(context.Background(), Request{MinBytes: 1 << 20, MaxBytes: 1 << 20, MaxWait: 30 * time.Millisecond,
		Partitions: []PartitionRequest{{Partition: p, MaxBytes: 1 << 20}}})
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("answered before max wait with min bytes unmet")
	}
	if len(res[0].Records) != 100 {
		t.Fatalf("timeout answer has %d bytes, want what was available (100)", len(res[0].Records))
	}
}

func TestFetchContextEndsWait(t *testing.T) {
	p := newFakePartition(100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Result)
	go func() {
		done <- newFetcher(t).Fetch(ctx, Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Hour,
			Partitions: []PartitionRequest{{Partition: p, MaxBytes: 1 << 20}}})
	}()
	cancel()
	select {
	case res := <-done:
		if res[0].Err != nil || len(res[0].Records) != 0 {
			t.Fatalf("got %v / %d bytes", res[0].Err, len(res[0].Records))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled fetch did not return")
	}
}

func TestFetchAnswersAtOnce(t *testing.T) {
	p := newFakePartition(100)
	tests := []struct {
		name string
		req  Request
	}{
		{"max wait zero", Request{MinBytes: 1, Partitions: []PartitionRequest{{Partition: p, MaxBytes: 100}}}},
		{"caller error", Request{MinBytes: 1, MaxWait: time.Hour, Partitions: []PartitionRequest{{Partition: p, MaxBytes: 100}, {Partition: nil}}}},
		{"out of range", Request{MinBytes: 1, MaxWait: time.Hour, Partitions: []PartitionRequest{{Partition: p, Offset: 7, MaxBytes: 100}}}},
		{"min bytes zero", Request{MinBytes: 0, MaxWait: time.Hour, Partitions: []PartitionRequest{{Partition: p, MaxBytes: 100}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan []Result, 1)
			go func() { done <- newFetcher(t).Fetch(context.Background(), tt.req) }()
			select {
			case res := <-done:
				if len(res) != len(tt.req.Partitions) {
					t.Fatalf("%d results for %d partitions", len(res), len(tt.req.Partitions))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("fetch waited")
			}
		})
	}
}

func TestFetchReadErrorsAreClassified(t *testing.T) {
	f := newFetcher(t)
	if err := f.readError(fmt.Errorf("seg: %w", hotlog.ErrOffsetOutOfRange), 3); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("hotlog out of range → %v", err)
	}
	if err := f.readError(hotlog.ErrStorage, 3); !errors.Is(err, ErrRead) || !errors.Is(err, hotlog.ErrStorage) {
		t.Fatalf("storage failure → %v", err)
	}
}

func TestTrimBatches(t *testing.T) {
	two := append(fakeBatch(0, 100), fakeBatch(1, 50)...)
	torn := append(fakeBatch(0, 100), fakeBatch(1, 50)[:30]...)
	bad := append(fakeBatch(0, 100), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
	tests := []struct {
		name   string
		in     []byte
		limit  int
		minOne bool
		want   int
	}{
		{"all", two, 1000, false, 150},
		{"exact", two, 150, false, 150},
		{"first only", two, 149, false, 100},
		{"none fits", two, 99, false, 0},
		{"KIP-74", two, 99, true, 100},
		{"torn tail", torn, 1000, false, 100},
		{"negative length", bad, 1000, false, 100},
		{"short", []byte{1, 2, 3}, 1000, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := trimBatches(tt.in, tt.limit, tt.minOne)
			if len(got) != tt.want || !bytes.Equal(got, tt.in[:tt.want]) {
				t.Fatalf("got %d bytes, want %d", len(got), tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{MaxResponseBytes: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative MaxResponseBytes: %v", err)
	}
}

func TestFetchLongPollAnswersWhenLogStartPassesOffset(t *testing.T) {
	p := newFakePartition(100)
	p.append(5, true)
	done := make(chan []Result)
	go func() {
		done <- newFetcher(t).Fetch(context.Background(), Request{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Minute,
			Partitions: []PartitionRequest{{Partition: p, Offset: 5, MaxBytes: 1 << 20}}})
	}()
	time.Sleep(20 * time.Millisecond)
	p.mu.Lock()
	p.mu.logStart = 6 // e.g. DeleteRecords to the HW after an append
	p.mu.batches = append(p.mu.batches, fakeBatch(5, 100))
	p.mu.hw = 6
	p.notifyLocked()
	p.mu.Unlock()
	select {
	case res := <-done:
		if !errors.Is(res[0].Err, ErrOffsetOutOfRange) || res[0].LogStartOffset != 6 {
			t.Fatalf("got %v, log start %d; want out of range with log start 6", res[0].Err, res[0].LogStartOffset)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting fetch not answered when its offset fell below the log start")
	}
}
