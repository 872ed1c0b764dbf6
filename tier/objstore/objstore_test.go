package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/tier/objstore"
	"github.com/strata-log/strata/tier/objtest"
)

func TestMemStoreContract(t *testing.T) {
	objtest.Run(t, func(*testing.T) objstore.ObjectStore { return objstore.NewMemStore() }, objtest.Options{})
}

// The wrappers must be transparent when nothing is injected.
func TestWrappersContract(t *testing.T) {
	objtest.Run(t, func(*testing.T) objstore.ObjectStore {
		r, err := objstore.NewRetrying(objstore.NewFaulty(objstore.NewCounting(
			objstore.NewLatency(objstore.NewMemStore(), time.Microsecond))), objstore.RetryPolicy{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}, objtest.Options{})
}

func noSleep(context.Context, time.Duration) error { return nil }

// stack is Retrying(Faulty(Counting(mem))): the counter sees the attempts
// that got past the fault injector, as a real provider would bill them.
type stack struct {
	mem      *objstore.MemStore
	counts   *objstore.Counting
	faults   *objstore.Faulty
	retrying *objstore.Retrying
}

func newStack(t *testing.T, policy objstore.RetryPolicy) *stack {
	s := &stack{mem: objstore.NewMemStore()}
	s.counts = objstore.NewCounting(s.mem)
	s.faults = objstore.NewFaulty(s.counts)
	if policy.Sleep == nil {
		policy.Sleep = noSleep
	}
	var err error
	if s.retrying, err = objstore.NewRetrying(s.faults, policy); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRetryingRetriesSlowDownThenSucceeds(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{MaxAttempts: 5})
	s.faults.Inject(objstore.Fault{Op: objstore.OpPut, Kind: objstore.FaultSlowDown, Times: 3})
	data := objtest.Payload(1, 4096)
	if err := s.retrying.Put(context.Background(), "c/k", bytes.NewReader(data), 4096); err != nil {
		t.Fatalf("put through 3 SlowDowns: %v", err)
	}
	if s.faults.Fired() != 3 {
		t.Fatalf("fired %d faults, want 3", s.faults.Fired())
	}
	if got := objtest.MustRead(t, s.mem, "c/k", 0, 4096); !bytes.Equal(got, data) {
		t.Fatal("object differs after retried put")
	}
	if put := s.counts.Total(objstore.OpPut); put.Requests != 1 || put.Bytes != 4096 {
		t.Fatalf("put counters %+v: the backend should see exactly one put", put)
	}
}

func TestRetryingGivesUpAfterMaxAttempts(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{MaxAttempts: 4})
	s.faults.Inject(objstore.Fault{Op: objstore.OpStat, Kind: objstore.FaultSlowDown})
	_, err := s.retrying.Stat(context.Background(), "c/k")
	var fe *objstore.FaultError
	if !errors.As(err, &fe) || fe.Kind != objstore.FaultSlowDown || !objstore.IsTransient(err) {
		t.Fatalf("err = %v, want the injected SlowDown", err)
	}
	if s.faults.Fired() != 4 {
		t.Fatalf("%d attempts, want 4", s.faults.Fired())
	}
}

func TestRetryingDoesNotRetryPermanentErrors(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{})
	s.faults.Inject(objstore.Fault{Op: objstore.OpDelete, Kind: objstore.FaultPermanent})
	if err := s.retrying.Delete(context.Background(), "c/k"); err == nil || objstore.IsTransient(err) {
		t.Fatalf("delete: %v, want a permanent error", err)
	}
	if s.faults.Fired() != 1 {
		t.Fatalf("%d attempts of a permanent failure, want 1", s.faults.Fired())
	}
	// Not found is permanent too: one Stat reaches the store.
	if _, err := s.retrying.Stat(context.Background(), "c/missing"); !s.retrying.IsNotFound(err) {
		t.Fatalf("stat missing: %v", err)
	}
	if st := s.counts.Total(objstore.OpStat); st.Requests != 1 || st.Errors != 1 {
		t.Fatalf("stat counters %+v, want 1 request, 1 error", st)
	}
}

func TestRetryingFailsNthCallOnly(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{MaxAttempts: 1}) // no retries: see the raw fault
	s.faults.Inject(objstore.Fault{Op: objstore.OpPut, Kind: objstore.FaultPermanent, Nth: 3, Times: 1})
	var failed []int
	for i := 1; i <= 5; i++ {
		if err := s.retrying.Put(context.Background(), "c/k", strings.NewReader("x"), 1); err != nil {
			failed = append(failed, i)
		}
	}
	if len(failed) != 1 || failed[0] != 3 {
		t.Fatalf("failed calls %v, want only the 3rd", failed)
	}
}

func TestRetryingResumesTruncatedBody(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{})
	data := objtest.Payload(2, 100_000)
	objtest.MustPut(t, s.mem, "c/k", data)
	s.faults.Inject(objstore.Fault{Op: objstore.OpGet, Kind: objstore.FaultTruncate, Times: 3})
	got := objtest.MustRead(t, s.retrying, "c/k", 1000, 90_000)
	if !bytes.Equal(got, data[1000:91_000]) {
		t.Fatalf("resumed body differs (%d bytes)", len(got))
	}
	if s.faults.Fired() != 3 {
		t.Fatalf("fired %d truncations, want 3", s.faults.Fired())
	}
	// The GET bytes count what the caller received from each attempt.
	if get := s.counts.Total(objstore.OpGet); get.Requests != 4 || get.Bytes < 90_000 {
		t.Fatalf("get counters %+v", get)
	}
}

func TestTruncatedBodyWithoutRetryIsUnexpectedEOF(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{})
	objtest.MustPut(t, s.mem, "c/k", objtest.Payload(3, 1000))
	s.faults.Inject(objstore.Fault{Op: objstore.OpGet, Kind: objstore.FaultTruncate})
	rc, err := s.faults.ReadRange(context.Background(), "c/k", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 500 {
		t.Fatalf("read %d bytes, err %v; want 500 and ErrUnexpectedEOF", len(got), err)
	}
}

func TestRetryingLostAckPutsOnce(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{})
	s.faults.Inject(objstore.Fault{Op: objstore.OpPut, Kind: objstore.FaultLostAck, Times: 1})
	data := objtest.Payload(4, 2000)
	if err := s.retrying.Put(context.Background(), "c/k", bytes.NewReader(data), 2000); err != nil {
		t.Fatalf("put: %v", err)
	}
	if got := objtest.MustRead(t, s.mem, "c/k", 0, 2000); !bytes.Equal(got, data) {
		t.Fatal("object differs after a lost ack and a retry")
	}
	if objs, _ := s.mem.List(context.Background(), ""); len(objs) != 1 {
		t.Fatalf("%d objects, want 1", len(objs))
	}
}

type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestRetryingPutReplaysSeekerFromItsStart(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{})
	s.faults.Inject(objstore.Fault{Op: objstore.OpPut, Kind: objstore.FaultLostAck, Times: 2})
	f := strings.NewReader("skipTHE-OBJECT")
	f.Seek(4, io.SeekStart) // strings.Reader is a ReaderAt too: section [0,size) is used
	if err := s.retrying.Put(context.Background(), "c/k", io.NewSectionReader(f, 4, 10), 10); err != nil {
		t.Fatal(err)
	}
	if got := objtest.MustRead(t, s.mem, "c/k", 0, 10); string(got) != "THE-OBJECT" {
		t.Fatalf("object %q", got)
	}
	// A body that cannot be replayed gets exactly one attempt.
	s.faults.Inject(objstore.Fault{Op: objstore.OpPut, Kind: objstore.FaultSlowDown, Times: 1})
	before := s.faults.Fired()
	err := s.retrying.Put(context.Background(), "c/k2", onlyReader{strings.NewReader("abc")}, 3)
	if err == nil || s.faults.Fired() != before+1 {
		t.Fatalf("non-replayable put: err %v, fired %d (before %d)", err, s.faults.Fired(), before)
	}
}

func TestRetryingTimeoutFault(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{AttemptTimeout: 20 * time.Millisecond})
	s.faults.Inject(objstore.Fault{Op: objstore.OpList, Kind: objstore.FaultTimeout, Delay: time.Hour, Times: 2})
	objtest.MustPut(t, s.mem, "c/a", []byte("x"))
	got, err := s.retrying.List(context.Background(), "c/")
	if err != nil || len(got) != 1 {
		t.Fatalf("list after two hung attempts: %v, %v", got, err)
	}
}

func TestRetryingStopsWhenCallerContextEnds(t *testing.T) {
	s := newStack(t, objstore.RetryPolicy{MaxAttempts: 1000, Sleep: func(ctx context.Context, d time.Duration) error {
		<-ctx.Done()
		return ctx.Err()
	}})
	s.faults.Inject(objstore.Fault{Kind: objstore.FaultSlowDown})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.retrying.Stat(ctx, "c/k"); err == nil {
		t.Fatal("stat succeeded")
	}
	if s.faults.Fired() != 1 {
		t.Fatalf("%d attempts after the context ended, want 1", s.faults.Fired())
	}
}

func TestBackoffIsCappedAndJittered(t *testing.T) {
	p := objstore.RetryPolicy{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond}.WithDefaults()
	distinct := map[time.Duration]bool{}
	for retry := 1; retry <= 20; retry++ {
		limit := min(80*time.Millisecond, 10*time.Millisecond<<(retry-1))
		for range 20 {
			d := p.Backoff(retry)
			if d < 0 || d > limit {
				t.Fatalf("backoff(%d) = %v outside [0, %v]", retry, d, limit)
			}
			distinct[d] = true
		}
	}
	if len(distinct) < 10 {
		t.Fatalf("only %d distinct waits: no jitter", len(distinct))
	}
}

func TestCountingPerOperationAndTopic(t *testing.T) {
	c := objstore.NewCounting(objstore.NewMemStore())
	ctx := context.Background()
	segKey := "strata/topics/orders-AAAAAAAAAAAAAAAAAAAAAA/00001/00000000000000000000-0-x.seg"
	objtest.MustPut(t, c, segKey, make([]byte, 300))
	objtest.MustRead(t, c, segKey, 100, 50)
	c.List(ctx, "strata/topics/")
	c.Stat(ctx, "strata/topics/orders-AAAAAAAAAAAAAAAAAAAAAA/nope")
	c.Delete(ctx, segKey)
	snap := c.Snapshot()
	want := map[objstore.CountKey]objstore.OpCounts{
		{Op: objstore.OpPut, Topic: "orders"}:    {Requests: 1, Bytes: 300},
		{Op: objstore.OpGet, Topic: "orders"}:    {Requests: 1, Bytes: 50},
		{Op: objstore.OpList, Topic: ""}:         {Requests: 1},
		{Op: objstore.OpStat, Topic: "orders"}:   {Requests: 1, Errors: 1},
		{Op: objstore.OpDelete, Topic: "orders"}: {Requests: 1},
	}
	if len(snap) != len(want) {
		t.Fatalf("snapshot %v, want %v", snap, want)
	}
	for k, v := range want {
		if snap[k] != v {
			t.Fatalf("%+v = %+v, want %+v", k, snap[k], v)
		}
	}
}

func TestTopicOfKey(t *testing.T) {
	for key, want := range map[string]string{
		"c/topics/my-topic-AAAAAAAAAAAAAAAAAAAAAA/00000/x.seg": "my-topic",
		"p/q/c/topics/t.1--AAAAAAAAAAAAAAAAAAAAA/topic.json":   "t.1",
		"c/topics/":                             "",
		"c/topics/short-id/00000/x.seg":         "",
		"c/mytopics/t-AAAAAAAAAAAAAAAAAAAAAA/x": "",
	} {
		if got := objstore.TopicOfKey(key); got != want {
			t.Errorf("TopicOfKey(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestLatencyDelaysEveryCall(t *testing.T) {
	l := objstore.NewLatency(objstore.NewMemStore(), 30*time.Millisecond)
	start := time.Now()
	objtest.MustPut(t, l, "c/k", []byte("x"))
	objtest.MustRead(t, l, "c/k", 0, 1)
	if elapsed := time.Since(start); elapsed < 60*time.Millisecond {
		t.Fatalf("two calls took %v, want >= 60ms", elapsed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Stat(ctx, "c/k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("stat with cancelled context: %v", err)
	}
}

func TestMemStoreCorrupt(t *testing.T) {
	m := objstore.NewMemStore()
	objtest.MustPut(t, m, "c/k", []byte{1, 2, 3})
	old, _ := m.ReadRange(context.Background(), "c/k", 0, 3)
	if !m.Corrupt("c/k", 1, 0xff) || m.Corrupt("c/k", 3, 1) || m.Corrupt("c/none", 0, 1) {
		t.Fatal("Corrupt reported the wrong result")
	}
	if got := objtest.MustRead(t, m, "c/k", 0, 3); !bytes.Equal(got, []byte{1, 0xfd, 3}) {
		t.Fatalf("after Corrupt: %v", got)
	}
	if b, _ := io.ReadAll(old); !bytes.Equal(b, []byte{1, 2, 3}) {
		t.Fatalf("a reader opened before Corrupt saw %v", b)
	}
}
