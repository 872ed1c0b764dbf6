package compaction

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// randomLog is a generated partition: batches end to end, the aborted
// transactions, and per input batch its description.
type randomLog struct {
	log     []byte
	batches []testBatch
	aborted []hotlog.AbortedTxn
	end     int64
}

// genLog builds a random keyed log with plain, idempotent and transactional
// producers (commits and aborts), tombstones, old and new timestamps and
// every codec.
func genLog(t testing.TB, rng *rand.Rand, n int) randomLog {
	var g randomLog
	txnFirst := map[int64]int64{} // producer -> first offset of its open transaction
	add := func(b testBatch) {
		b.codec = rng.IntN(5)
		b.firstTs = []int64{oldTs, newTs}[rng.IntN(2)]
		b.base = g.end
		g.batches = append(g.batches, b)
		g.log = append(g.log, buildBatch(t, b)...)
		g.end = b.base + int64(b.records[len(b.records)-1].delta) + 1
		if b.control {
			g.end = b.base + 1
		}
	}
	endTxn := func(pid int64) {
		commit := rng.IntN(2) == 0
		if !commit {
			g.aborted = append(g.aborted, hotlog.AbortedTxn{ProducerID: pid, FirstOffset: txnFirst[pid], LastOffset: g.end})
		}
		delete(txnFirst, pid)
		add(testBatch{control: true, commit: commit, producerID: pid, records: []testRecord{{}}})
	}
	for range n {
		b := testBatch{records: randomRecords(rng)}
		switch pid := int64(rng.IntN(4)); pid {
		case 0: // plain producer
		case 1:
			b.idempotent, b.producerID = true, 1
		default: // transactional producers 2 and 3
			if _, open := txnFirst[pid]; open && rng.IntN(3) == 0 {
				endTxn(pid)
				continue
			}
			if _, open := txnFirst[pid]; !open {
				txnFirst[pid] = g.end
			}
			b.txn, b.producerID = true, pid
		}
		add(b)
	}
	for _, pid := range []int64{2, 3} {
		if _, open := txnFirst[pid]; open {
			endTxn(pid)
		}
	}
	return g
}

func randomRecords(rng *rand.Rand) []testRecord {
	n := 1 + rng.IntN(4)
	var out []testRecord
	delta := int32(0)
	for range n {
		r := testRecord{delta: delta, tsDelta: int64(rng.IntN(5)), key: fmt.Appendf(nil, "k%d", rng.IntN(25))}
		if rng.IntN(6) != 0 {
			r.value = fmt.Appendf(nil, "v%d", rng.Uint32())
		}
		out = append(out, r)
		delta += 1 + int32(rng.IntN(2)) // gaps inside a batch, as after an earlier cleaning
	}
	return out
}

// expected is the naive model: the latest non-aborted record of each key,
// minus tombstones past the delete horizon.
func (g randomLog) expected() map[int64]liveRecord {
	aborts := newAbortIndex(g.aborted)
	latest := map[string]liveRecord{}
	pastHorizon := map[int64]bool{}
	for i, b := range g.batches {
		h, _ := recordbatch.ValidateStored(g.log[g.offsetOf(i):])
		if b.control || aborts.aborted(h) {
			continue
		}
		for _, r := range b.records {
			o := b.base + int64(r.delta)
			latest[string(r.key)] = liveRecord{offset: o, key: string(r.key), value: string(r.value), tombstone: r.value == nil}
			pastHorizon[o] = h.MaxTimestamp < testNow-testRetention
		}
	}
	out := map[int64]liveRecord{}
	for _, r := range latest {
		if !(r.tombstone && pastHorizon[r.offset]) {
			out[r.offset] = r
		}
	}
	return out
}

// offsetOf returns the byte position of batch i in the log.
func (g randomLog) offsetOf(i int) int {
	pos := 0
	for j := 0; j < i; j++ {
		h, _ := recordbatch.ParseHeader(g.log[pos:])
		pos += h.Size()
	}
	return pos
}

// TestRewriteMatchesModel cleans random logs in several passes through a
// small map and compares with the naive model after every pass.
func TestRewriteMatchesModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			g := genLog(t, rng, 120)
			want := g.expected()
			log, checkpoint, passes := g.log, int64(0), 0
			m := NewOffsetMap(20 * SlotBytes) // 18 keys: several passes
			for checkpoint < g.end {
				m.Reset()
				mapEnd, err := BuildMap(m, NewSliceSource(log), checkpoint, g.end, g.aborted, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				log, _ = rewriteAll(t, Policy{Map: m, MapEnd: mapEnd, NowMs: testNow, DeleteRetentionMs: testRetention,
					Aborted: g.aborted, FromLogStart: true}, log)
				checkInvariants(t, g, log, want, mapEnd == g.end)
				checkpoint, passes = mapEnd, passes+1
			}
			if passes < 2 {
				t.Fatalf("only %d pass: map too large for the test", passes)
			}
		})
	}
}

// checkInvariants checks an output log against the input and the model:
// every expected record is present unchanged at its offset; after the final
// pass nothing else is; headers are preserved; producers' last data batches
// survive; kept transactional data keeps its marker.
func checkInvariants(t *testing.T, g randomLog, out []byte, want map[int64]liveRecord, final bool) {
	t.Helper()
	hs, live := decodeLog(t, out)
	inputs := map[int64]int{} // base offset -> input batch index
	for i, b := range g.batches {
		inputs[b.base] = i
	}
	got := map[int64]liveRecord{}
	prev := int64(-1)
	for _, r := range live {
		if r.offset <= prev {
			t.Fatalf("offset %d after %d", r.offset, prev)
		}
		prev = r.offset
		got[r.offset] = r
	}
	for o, w := range want {
		if got[o] != w {
			t.Fatalf("expected record %+v lost or changed: %+v", w, got[o])
		}
	}
	if final && len(got) != len(want) {
		t.Fatalf("final: %d records, model has %d", len(got), len(want))
	}
	kept := map[int64]bool{}
	lastData := producersLastData(g)
	for _, h := range hs {
		if final && h.RecordCount == 0 && !h.Control() && lastData[h.ProducerID] != h.BaseOffset {
			t.Fatalf("final: empty batch at %d kept but not its producer's last", h.BaseOffset)
		}
		i, ok := inputs[h.BaseOffset]
		if !ok {
			t.Fatalf("output batch at %d matches no input batch", h.BaseOffset)
		}
		in, _ := recordbatch.ValidateStored(g.log[g.offsetOf(i):])
		in.RecordCount, in.CRC, in.BatchLength = h.RecordCount, h.CRC, h.BatchLength
		if in != h {
			t.Fatalf("header changed:\n in %+v\nout %+v", in, h)
		}
		kept[h.BaseOffset] = true
	}
	checkProducers(t, g, kept)
}

// checkProducers: each producer's last data batch is kept, and the marker
// after any kept transactional data batch is kept.
func checkProducers(t *testing.T, g randomLog, kept map[int64]bool) {
	t.Helper()
	for pid, base := range producersLastData(g) {
		if !kept[base] {
			t.Fatalf("producer %d's last data batch at %d dropped", pid, base)
		}
	}
	for i, b := range g.batches {
		if !b.txn || !kept[b.base] {
			continue
		}
		for _, c := range g.batches[i+1:] {
			if c.control && c.producerID == b.producerID {
				if !kept[c.base] {
					t.Fatalf("marker at %d dropped but data of its txn at %d kept", c.base, b.base)
				}
				break
			}
		}
	}
}

// producersLastData maps each producer id to its last data batch's base offset.
func producersLastData(g randomLog) map[int64]int64 {
	lastData := map[int64]int64{}
	for _, b := range g.batches {
		if !b.control && (b.idempotent || b.txn) {
			lastData[b.producerID] = b.base
		}
	}
	return lastData
}
