package e2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// diskBatch is one RecordBatch v2 found in a segment file.
type diskBatch struct {
	pos, size  int64 // byte range in the file
	baseOffset int64
	attributes int16 // bits 0-2: compression codec
}

// segmentFiles lists a partition's .log files in offset order.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(logs) // names are zero-padded base offsets
	return logs
}

// readBatches walks a segment file by the batch header's length field
// (baseOffset i64, batchLength i32: batch size is 12+batchLength).
func readBatches(t testing.TB, path string) []diskBatch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []diskBatch
	for pos := int64(0); pos+61 <= int64(len(data)); {
		length := int64(int32(binary.BigEndian.Uint32(data[pos+8:])))
		if length == 0 {
			break // zeros: a preallocated tail past the last batch
		}
		size := 12 + length
		if length < 49 || pos+size > int64(len(data)) {
			t.Fatalf("%s: bad batch at %d (length %d, file %d bytes)", path, pos, length, len(data))
		}
		out = append(out, diskBatch{
			pos: pos, size: size,
			baseOffset: int64(binary.BigEndian.Uint64(data[pos:])),
			attributes: int16(binary.BigEndian.Uint16(data[pos+21:])),
		})
		pos += size
	}
	return out
}

// produceUntilSegments produces one record per batch until the partition has
// at least three segments and the active one holds at least six batches.
func produceUntilSegments(t *testing.T, b *Broker, cl *kgo.Client, topic string) map[int64]*kgo.Record {
	byOffset := map[int64]*kgo.Record{}
	dir := b.PartitionDir(topic, 0)
	for i := 0; i < 3000; i++ {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d-%s", topic, i, strings.Repeat("r", 200))}
		produceSync(t, cl, r)
		byOffset[r.Offset] = r
		if i%5 != 4 {
			continue
		}
		segs := segmentFiles(t, dir)
		if len(segs) >= 3 {
			if st, err := os.Stat(segs[len(segs)-1]); err == nil && st.Size() >= 6*300 {
				return byOffset
			}
		}
	}
	t.Fatalf("%s: never reached 3 segments with 6 batches in the active one (dir %s)", topic, dir)
	return nil
}

// damage describes one corruption of the active segment.
type damage func(t *testing.T, path string, victim diskBatch)

func truncateMidBatch(t *testing.T, path string, victim diskBatch) {
	if err := os.Truncate(path, victim.pos+victim.size/2); err != nil {
		t.Fatal(err)
	}
}

func flipByteInBatch(t *testing.T, path string, victim diskBatch) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := victim.pos + victim.size - 3 // inside the last record's value: covered by the CRC
	buf := make([]byte, 1)
	if _, err := f.ReadAt(buf, at); err != nil {
		t.Fatal(err)
	}
	buf[0] ^= 0x20
	if _, err := f.WriteAt(buf, at); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryRepairsDamagedTail: a segment truncated mid-batch, and one with
// a flipped byte, are repaired on start: every batch before the damage is
// served, nothing from the damaged batch on, and new produces continue at
// the damaged batch's offset.
//
// The damage is done after a clean stop (SIGTERM, the brief's case: the
// broker must still check the active segment) and after kill -9.
func TestRecoveryRepairsDamagedTail(t *testing.T) {
	t.Run("after SIGTERM", func(t *testing.T) {
		recoverDamaged(t, func(b *Broker) {
			if err := b.Stop(); err != nil {
				t.Fatalf("SIGTERM: want exit 0, got %v", err)
			}
		})
	})
	t.Run("after kill -9", func(t *testing.T) { recoverDamaged(t, (*Broker).Kill) })
}

// recoverDamaged runs the scenario with stop ending the broker (it may call
// t.Fatal: it runs on t's goroutine).
func recoverDamaged(t *testing.T, stop func(*Broker)) {
	b := StartBroker(t)
	cases := []struct {
		topic string
		hurt  damage
	}{
		{"recover-truncated", truncateMidBatch},
		{"recover-flipped", flipByteInBatch},
	}
	produced := map[string]map[int64]*kgo.Record{}
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for _, c := range cases {
		createTopic(t, b.Admin(), c.topic, 1, map[string]string{"internal.segment.bytes": "16384", "retention.ms": "-1"})
		produced[c.topic] = produceUntilSegments(t, b, cl, c.topic)
	}
	cl.Close()
	stop(b)

	cut := map[string]int64{} // first offset that must no longer be served
	for _, c := range cases {
		segs := segmentFiles(t, b.PartitionDir(c.topic, 0))
		active := segs[len(segs)-1]
		batches := readBatches(t, active)
		victim := batches[len(batches)/2]
		c.hurt(t, active, victim)
		cut[c.topic] = victim.baseOffset
		t.Logf("%s: damaged %s at batch offset %d (file pos %d, %d batches)", c.topic, filepath.Base(active), victim.baseOffset, victim.pos, len(batches))
	}

	b.Start()
	adm := b.Admin()
	cl = b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for _, c := range cases {
		checkRecovered(t, b, cl, c.topic, produced[c.topic], cut[c.topic], endOffsets(t, adm, c.topic)[0])
	}
}

// checkRecovered asserts the log ends exactly at cut, serves every record
// below it unchanged, and appends new records at cut.
func checkRecovered(t *testing.T, b *Broker, cl *kgo.Client, topic string, produced map[int64]*kgo.Record, cut, end int64) {
	if end != cut {
		t.Fatalf("%s: log end offset after recovery %d, want %d (the damaged batch's base offset)", topic, end, cut)
	}
	got := consumeRange(t, b, topic, 0, 0, cut)
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("%s: record %d has offset %d", topic, i, r.Offset)
		}
		if r.Offset >= cut {
			t.Fatalf("%s: offset %d served past the damage at %d", topic, r.Offset, cut)
		}
		if want := produced[r.Offset]; want == nil || string(r.Value) != string(want.Value) {
			t.Fatalf("%s: offset %d value %.40q differs from what was produced", topic, r.Offset, r.Value)
		}
	}
	for i := int64(0); i < 3; i++ {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "after-recovery-%d", i)}
		produceSync(t, cl, r)
		if r.Offset != cut+i {
			t.Fatalf("%s: new record got offset %d, want %d", topic, r.Offset, cut+i)
		}
	}
	after := consumeRange(t, b, topic, 0, cut, cut+3)
	for i, r := range after {
		if want := fmt.Sprintf("after-recovery-%d", i); r.Offset != cut+int64(i) || string(r.Value) != want {
			t.Fatalf("%s: after recovery read offset %d %q, want %d %q", topic, r.Offset, r.Value, cut+int64(i), want)
		}
	}
}
