package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// kv is one record of a keyed test batch.
type kv struct{ key, value string }

// keyedBatch builds an uncompressed batch at base of records with keys
// (offset deltas 0..n-1). pid >= 0 makes it a transactional batch of pid.
func keyedBatch(base, ts int64, pid int64, records []kv) []byte {
	var raw []byte
	for i, r := range records {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: []byte(r.key), Value: []byte(r.value)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
	}
	b := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: 1, Magic: 2, LastOffsetDelta: int32(len(records) - 1),
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(records)), Records: raw}
	if pid >= 0 {
		b.Attributes, b.ProducerID, b.ProducerEpoch, b.FirstSequence = 0x10, pid, 0, 0
	}
	return sealBatch(b)
}

// markerBatch builds an abort marker (control batch) of pid at offset.
func markerBatch(offset, ts, pid int64) []byte {
	key := []byte{0, 0, 0, 0} // version 0, type 0 = abort
	value := []byte{0, 0, 0, 0, 0, 0}
	rec := kmsg.Record{Key: key, Value: value}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	b := kmsg.RecordBatch{FirstOffset: offset, PartitionLeaderEpoch: 1, Magic: 2, Attributes: 0x30,
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 0, FirstSequence: -1,
		NumRecords: 1, Records: rec.AppendTo(nil)}
	return sealBatch(b)
}

func sealBatch(b kmsg.RecordBatch) []byte {
	b.Length = int32(49 + len(b.Records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32c(out[21:]))
	return out
}

// testRecordAt is a record read back from a batch.
type testRecordAt struct {
	offset int64
	key    string
	value  string
}

// batchRecords parses the (uncompressed) records of one batch.
func batchRecords(t testing.TB, batch []byte) (recordbatch.Header, []testRecordAt) {
	t.Helper()
	h, recs, err := parseRecords(batch)
	if err != nil {
		t.Fatal(err)
	}
	return h, recs
}

// parseRecords is batchRecords for goroutines that cannot t.Fatal.
func parseRecords(batch []byte) (recordbatch.Header, []testRecordAt, error) {
	h, err := CheckStoredBatch(batch)
	if err != nil {
		return h, nil, err
	}
	var out []testRecordAt
	raw := batch[recordbatch.HeaderSize:h.Size()]
	for len(raw) > 0 {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int64(n)+length > int64(len(raw)) {
			return h, nil, errors.New("bad record framing")
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(raw[:int64(n)+length]); err != nil {
			return h, nil, err
		}
		out = append(out, testRecordAt{offset: h.BaseOffset + int64(rec.OffsetDelta), key: string(rec.Key), value: string(rec.Value)})
		raw = raw[int64(n)+length:]
	}
	return h, out, nil
}

// splitBatches cuts a byte stream of whole batches.
func splitBatches(t testing.TB, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		h, err := recordbatch.ParseHeader(data)
		if err != nil {
			t.Fatalf("split: %v", err)
		}
		out = append(out, data[:h.Size()])
		data = data[h.Size():]
	}
	return out
}

// keepLatest is the test's rewrite: the latest record per key survives
// (offsets preserved), batches left empty are dropped, control batches are
// kept when keepMarker says so. It reads the whole run first (tests only).
func keepLatest(t testing.TB, keepMarker func(offset int64) bool) RewriteFunc {
	return func(src BatchSource, sink func([]byte) error) error {
		var all [][]byte
		latest := map[string]int64{}
		for {
			b, err := src.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			b = bytes.Clone(b)
			all = append(all, b)
			if h, recs := batchRecords(t, b); !h.Control() {
				for _, r := range recs {
					latest[r.key] = r.offset
				}
			}
		}
		for _, b := range all {
			out := rewriteBatch(t, b, latest, keepMarker)
			if out == nil {
				continue
			}
			if err := sink(out); err != nil {
				return err
			}
		}
		return nil
	}
}

// rewriteBatch keeps b's records that are the latest of their key; nil
// when none is left.
func rewriteBatch(t testing.TB, b []byte, latest map[string]int64, keepMarker func(int64) bool) []byte {
	h, recs := batchRecords(t, b)
	if h.Control() {
		if keepMarker != nil && keepMarker(h.BaseOffset) {
			return b
		}
		return nil
	}
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	n := int32(0)
	for _, r := range recs {
		if latest[r.key] != r.offset {
			continue
		}
		rec := kmsg.Record{OffsetDelta: int32(r.offset - h.BaseOffset), Key: []byte(r.key), Value: []byte(r.value)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
		n++
	}
	if n == 0 {
		return nil
	}
	batch.NumRecords, batch.Records = n, raw
	return sealBatch(batch)
}

// memSwapper is an in-memory ManifestSwapper with the guard semantics of
// metadata.SwapTierEntriesRev (versions must match; fail changes nothing).
type memSwapper struct {
	mu      sync.Mutex
	rev     int64
	entries map[int64]metadata.TierEntry // by base offset
	fail    error                        // returned by the next swap if set
}

func newMemSwapper(entries []metadata.TierEntry) *memSwapper {
	s := &memSwapper{entries: map[int64]metadata.TierEntry{}}
	for _, e := range entries {
		s.entries[e.BaseOffset] = e
		s.rev = max(s.rev, e.Version)
	}
	return s
}

func (s *memSwapper) SwapTierEntriesRev(_ context.Context, olds, news []metadata.TierEntry) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail; err != nil {
		s.fail = nil
		return 0, err
	}
	for _, e := range olds {
		if cur, ok := s.entries[e.BaseOffset]; !ok || cur.Version != e.Version {
			return 0, fmt.Errorf("%w: %d", metadata.ErrTierEntriesChanged, e.BaseOffset)
		}
	}
	if news[0].BaseOffset != olds[0].BaseOffset || news[len(news)-1].LastOffset != olds[len(olds)-1].LastOffset {
		return 0, errors.New("memSwapper: news do not cover olds")
	}
	s.rev++
	for _, e := range olds {
		delete(s.entries, e.BaseOffset)
	}
	for _, e := range news {
		e.Version = s.rev
		s.entries[e.BaseOffset] = e
	}
	return s.rev, nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
