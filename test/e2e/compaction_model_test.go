package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordGen makes record seq of a test deterministically, so the model
// keeps only offset → seq and recomputes keys and values. A nil value is a
// tombstone.
type recordGen func(seq int) (key string, value []byte)

// keyedLog models one compacted partition from the producer's
// acknowledgements: which record (seq) each acknowledged offset holds.
// Safe for concurrent use: the producer's promises add, the test reads.
type keyedLog struct {
	gen recordGen

	mu struct {
		sync.Mutex
		seqAt []int32 // offset → seq; -1: no acknowledged record (yet)
	}
}

func newKeyedLog(gen recordGen) *keyedLog { return &keyedLog{gen: gen} }

// ack records that seq was acknowledged at offset. It reports an error when
// two records were acknowledged at the same offset.
func (m *keyedLog) ack(seq int, offset int64) error {
	if offset < 0 || offset > 1<<31 {
		return fmt.Errorf("record %d acknowledged at offset %d", seq, offset)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for int64(len(m.mu.seqAt)) <= offset {
		m.mu.seqAt = append(m.mu.seqAt, -1)
	}
	if prev := m.mu.seqAt[offset]; prev >= 0 && int(prev) != seq {
		return fmt.Errorf("offset %d acknowledged for records %d and %d", offset, prev, seq)
	}
	m.mu.seqAt[offset] = int32(seq)
	return nil
}

// keyState is what the model says of one key: its latest acknowledged
// record's offset and whether that record is a tombstone.
type keyState struct {
	offset  int64
	deleted bool
}

// modelView is a snapshot of the model: the acknowledged records and each
// key's latest.
type modelView struct {
	gen    recordGen
	seqAt  []int32
	latest map[string]keyState
}

// view snapshots the acknowledgements so far.
func (m *keyedLog) view() *modelView {
	m.mu.Lock()
	seqAt := append([]int32(nil), m.mu.seqAt...)
	m.mu.Unlock()
	v := &modelView{gen: m.gen, seqAt: seqAt, latest: map[string]keyState{}}
	for off, seq := range seqAt {
		if seq >= 0 {
			k, val := m.gen(int(seq))
			v.latest[k] = keyState{offset: int64(off), deleted: val == nil}
		}
	}
	return v
}

// end is one past the highest acknowledged offset.
func (v *modelView) end() int64 { return int64(len(v.seqAt)) }

// checkRecord fails t unless r is the record acknowledged at its offset
// (key, value, tombstone-ness). Offsets the model does not know (produced
// but not acknowledged yet) only need a key of the test's shape.
func (v *modelView) checkRecord(t testing.TB, r *kgo.Record) {
	t.Helper()
	if r.Offset >= v.end() || v.seqAt[r.Offset] < 0 {
		return
	}
	seq := int(v.seqAt[r.Offset])
	k, val := v.gen(seq)
	if string(r.Key) != k || (r.Value == nil) != (val == nil) || !bytes.Equal(r.Value, val) {
		t.Fatalf("offset %d holds key %q value %q; record %d acknowledged there has key %q value %q",
			r.Offset, r.Key, r.Value, seq, k, val)
	}
}

// readLog consumes topic/0 from offset 0 until it has read every record
// below until (a record at or past until-1, or nothing more within the
// timeout: compaction leaves gaps, so the last record may be gone). fn sees
// each record once, in order, and may stop the read by returning false.
// Offsets must increase strictly.
func readLog(t testing.TB, b *Broker, topic string, until int64, fn func(*kgo.Record) bool) {
	t.Helper()
	cl := b.Client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	defer cl.Close()
	last := int64(-1)
	deadline := time.Now().Add(60 * time.Second)
	quiet := time.Time{} // when a poll first came back empty after the HW was reached
	for last < until-1 {
		if time.Now().After(deadline) {
			t.Fatalf("read %s from 0: reached offset %d of %d within 60s", topic, last, until)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("consume %s[%d]: %v", tp, p, err)
			}
		})
		if fs.NumRecords() == 0 {
			// The last records may have been compacted away: stop once the
			// partition's HW is past until and nothing more arrives.
			if quiet.IsZero() {
				quiet = time.Now()
			} else if time.Since(quiet) > 3*time.Second {
				return
			}
			continue
		}
		quiet = time.Time{}
		for _, r := range fs.Records() {
			if r.Offset <= last {
				t.Fatalf("%s: offset %d served after %d", topic, r.Offset, last)
			}
			last = r.Offset
			if r.Offset >= until {
				return
			}
			if !fn(r) {
				return
			}
		}
	}
}

// convergence is what a converged compacted log must look like.
type convergence struct {
	// keepTombstones: every deleted key's tombstone must still be there
	// (delete.retention.ms not passed); otherwise no deleted key may remain.
	keepTombstones bool
}

// converged reads the partition and returns why it is not (yet) cleaned to
// the model ("" when it is): a record that is not its key's latest, a
// tombstone that should be gone, or one that should still be there.
// Records that contradict the acknowledgements fail t at once; so does a
// live key whose latest value is missing (a loss, never a matter of time).
func (v *modelView) converged(t testing.TB, b *Broker, topic string, want convergence) string {
	t.Helper()
	why := ""
	seen := map[string]bool{}
	readLog(t, b, topic, v.end(), func(r *kgo.Record) bool {
		v.checkRecord(t, r)
		st, ok := v.latest[string(r.Key)]
		switch {
		case !ok:
			t.Fatalf("offset %d: key %q was never acknowledged", r.Offset, r.Key)
		case st.offset != r.Offset:
			why = fmt.Sprintf("offset %d: key %q superseded at %d", r.Offset, r.Key, st.offset)
		case st.deleted && !want.keepTombstones:
			why = fmt.Sprintf("offset %d: tombstone of %q still there", r.Offset, r.Key)
		}
		seen[string(r.Key)] = true
		return why == ""
	})
	if why != "" {
		return why
	}
	for k, st := range v.latest {
		switch {
		case !st.deleted && !seen[k]:
			t.Fatalf("live key %q (latest at offset %d) is missing", k, st.offset)
		case st.deleted && want.keepTombstones && !seen[k]:
			t.Fatalf("tombstone of %q (offset %d) gone before delete.retention.ms", k, st.offset)
		}
	}
	return ""
}

// waitConverged polls converged until it holds or timeout passes.
func (v *modelView) waitConverged(t testing.TB, b *Broker, topic string, want convergence, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		why := v.converged(t, b, topic, want)
		if why == "" {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s not compacted after %v: %s", topic, timeout, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkNoLoss reads the whole partition and fails t when a key that was
// live in before (a snapshot taken while the broker was down) has no record
// at or after its latest acknowledged offset: the cleaner may drop a value
// only for a newer one of the same key (or a tombstone, which may then go).
// now must cover every record in the log (producer quiet, all acknowledged).
func checkNoLoss(t testing.TB, b *Broker, topic string, before, now *modelView, until int64) {
	t.Helper()
	newest := map[string]int64{}
	var offsets []int64
	readLog(t, b, topic, until, func(r *kgo.Record) bool {
		now.checkRecord(t, r)
		newest[string(r.Key)] = r.Offset
		offsets = append(offsets, r.Offset)
		return true
	})
	for k, st := range before.latest {
		if cur := now.latest[k]; st.deleted || cur.deleted && cur.offset > st.offset {
			continue // deleted (maybe by a record acknowledged after the restart): its tombstone may be gone
		}
		if got, ok := newest[k]; !ok || got < st.offset {
			var segs []string
			for _, f := range segmentFiles(t, b.PartitionDir(topic, 0)) {
				var bases []int64
				for _, bt := range readBatches(t, f) {
					bases = append(bases, bt.baseOffset)
				}
				segs = append(segs, fmt.Sprintf("%s: batches at %v", filepath.Base(f), bases))
			}
			t.Fatalf("key %q: latest acknowledged at %d before the kill; newest record after restart: %d (present %v)\n"+
				"read %d records up to %d: %v\nsegments:\n%s",
				k, st.offset, got, ok, len(offsets), until, offsets, strings.Join(segs, "\n"))
		}
	}
}

// activeSegmentBase is the base offset of the partition's last segment.
func activeSegmentBase(t testing.TB, b *Broker, topic string) int64 {
	t.Helper()
	segs := segmentFiles(t, b.PartitionDir(topic, 0))
	if len(segs) == 0 {
		return -1
	}
	var base int64
	if _, err := fmt.Sscanf(filepath.Base(segs[len(segs)-1]), "%d.log", &base); err != nil {
		t.Fatalf("segment name %s: %v", segs[len(segs)-1], err)
	}
	return base
}

// cleanerLeftovers lists the files a cleaning pass leaves while in flight:
// cleaned segments being written, swap files and the swap marker.
func cleanerLeftovers(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".cleaned") || strings.HasSuffix(n, ".swap") || strings.HasSuffix(n, ".deleted") || n == "cleaner-swap" {
			out = append(out, n)
		}
	}
	return out
}

// cleanedSinceLastStart counts the broker's "cleaned" log lines since its
// last start.
func cleanedSinceLastStart(b *Broker) int {
	log := b.Log()
	if i := strings.LastIndex(log, "\n=== "); i >= 0 {
		log = log[i:]
	}
	return strings.Count(log, "msg=cleaned ")
}
