package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// Issue 7's acceptance on local segments: remote.storage.enable=false keeps
// the bucket out, so the local cleaner owns every sealed segment.

const (
	millionRecords = 1_000_000
	millionKeys    = 10_000
	millionDeleted = 500 // 5% of the keys get a tombstone at the end
	fillerSeq      = 1 << 30
)

// mix spreads seq over 64 bits (a fixed odd multiplier and a xorshift), so
// keys repeat in a scattered but reproducible order.
func mix(seq int) uint64 {
	h := uint64(seq)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	return h ^ h>>29
}

// fillerRecord is a unique-key record that only serves to roll segments.
func fillerRecord(seq int) (string, []byte) {
	h := mix(seq)
	return fmt.Sprintf("fill-%010d", seq), fmt.Appendf(nil, "filler-%d-%016x%016x", seq, h, mix(int(h)))
}

// millionGen: records [0, 1M) are versions of 10,000 keys with 40-60 byte
// values; the next 500 are tombstones of every 20th key; then filler.
func millionGen(seq int) (string, []byte) {
	switch {
	case seq < millionRecords:
		key := fmt.Sprintf("key-%05d", mix(seq)%millionKeys)
		value := fmt.Appendf(nil, "%s-v%07d-", key, seq)
		for pad := 40 + seq%21; len(value) < pad; {
			value = append(value, byte('a'+(seq+len(value))%26))
		}
		return key, value
	case seq < millionRecords+millionDeleted:
		return fmt.Sprintf("key-%05d", (seq-millionRecords)*(millionKeys/millionDeleted)), nil
	default:
		return fillerRecord(seq)
	}
}

// asyncProducer produces generated records and acknowledges them into a
// keyedLog. errs collects failures (guarded by mu).
type asyncProducer struct {
	cl  *kgo.Client
	m   *keyedLog
	mu  sync.Mutex
	err error
}

func (p *asyncProducer) produce(topic string, seq int) {
	k, v := p.m.gen(seq)
	r := &kgo.Record{Topic: topic, Key: []byte(k), Value: v}
	// context.Background: a cancelled context could fail a record that
	// was already sent, leaving its fate unknown to the model.
	p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		if err == nil {
			err = p.m.ack(seq, r.Offset)
		}
		if err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = fmt.Errorf("record %d: %w", seq, err)
			}
			p.mu.Unlock()
		}
	})
}

// flush waits for every buffered record and fails t on any produce error.
func (p *asyncProducer) flush(t testing.TB, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		t.Fatalf("produce: %v", p.err)
	}
}

// rollPast produces filler (starting at *seq) until the active segment
// starts above offset, so every record up to offset is in sealed segments.
func (p *asyncProducer) rollPast(t testing.TB, b *Broker, topic string, offset int64, seq *int) {
	t.Helper()
	for round := 0; activeSegmentBase(t, b, topic) <= offset; round++ {
		if round == 200 {
			t.Fatalf("active segment still starts at or below %d after %d filler records", offset, *seq-fillerSeq)
		}
		for range 2000 {
			p.produce(topic, *seq)
			*seq++
		}
		p.flush(t, 60*time.Second)
	}
}

// TestCompaction1MRecords: 1,000,000 keyed records over 10,000 keys, 5% of
// the keys then deleted by tombstones. With delete.retention.ms at an hour
// the cleaned log holds each key's latest record exactly once, tombstones
// included, at the offsets the producer was told; with delete.retention.ms
// lowered to 2s the next cleaning drops the deleted keys. A consumer from
// offset 0 sees a gapped, strictly increasing offset sequence throughout.
func TestCompaction1MRecords(t *testing.T) {
	testStart := time.Now()
	b := StartBroker(t, withArgs("--log-cleaner-backoff", "100ms"))
	const topic = "compact-1m"
	createTopic(t, b.Admin(), topic, 1, map[string]string{
		"cleanup.policy": "compact", "remote.storage.enable": "false", "internal.segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "3600000",
	})
	m := newKeyedLog(millionGen)
	p := &asyncProducer{m: m, cl: b.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchCompression(kgo.Lz4Compression()))}

	start := time.Now()
	payload := 0 // key and value bytes, for scale
	for seq := range millionRecords + millionDeleted {
		p.produce(topic, seq)
		k, v := millionGen(seq)
		payload += len(k) + len(v)
	}
	p.flush(t, 3*time.Minute)
	lastTombstone := m.view().end() - 1
	filler := fillerSeq
	p.rollPast(t, b, topic, lastTombstone, &filler)
	produced := time.Since(start)
	dir := b.PartitionDir(topic, 0)
	sizeProduced := logBytesOnDisk(t, dir)
	t.Logf("produced %d records (%d bytes of keys and values, lz4) + %d filler in %v; %d bytes of segments (%d files) right after (the cleaner runs meanwhile)",
		millionRecords+millionDeleted, payload, filler-fillerSeq, produced.Round(time.Millisecond), sizeProduced, len(segmentFiles(t, dir)))

	view := m.view()
	took := view.waitConverged(t, b, topic, convergence{keepTombstones: true}, 120*time.Second)
	sizeCleaned := logBytesOnDisk(t, dir)
	t.Logf("cleaned to the latest record per key, %d tombstones kept, %v after producing; %d bytes of segments (%d files)",
		millionDeleted, took.Round(time.Millisecond), sizeCleaned, len(segmentFiles(t, dir)))

	// delete.retention.ms passes: the next pass (new dirty data) drops the
	// tombstones and the deleted keys are gone.
	alterTopicConfig(t, b.Admin(), topic, "delete.retention.ms", "2000")
	p.rollPast(t, b, topic, m.view().end()-1, &filler)
	took = m.view().waitConverged(t, b, topic, convergence{}, 120*time.Second)
	t.Logf("tombstones dropped %v after lowering delete.retention.ms to 2s; %d bytes of segments; whole test %v",
		took.Round(time.Millisecond), logBytesOnDisk(t, dir), time.Since(testStart).Round(time.Millisecond))
}

const killKeys = 1000

// killGen: versions of 1,000 keys, one in 25 a tombstone; filler above
// fillerSeq.
func killGen(seq int) (string, []byte) {
	if seq >= fillerSeq {
		return fillerRecord(seq)
	}
	h := mix(seq)
	key := fmt.Sprintf("k%04d", h%killKeys)
	if h>>32%25 == 0 {
		return key, nil
	}
	return key, fmt.Appendf(nil, "%s-s%08d-%s", key, seq, strings.Repeat("v", int(h>>40%30)))
}

// startKillProducer writes killGen records to topic at 2,000/s for the
// kill -9 tests. Small batches: each must fit a small offset map on its
// own. Short metadata age and retry backoff: after a restart the producer
// resumes within ~100ms instead of seconds.
func startKillProducer(b *Broker, topic string, m *keyedLog) *steadyProducer {
	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(8<<10),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	return newSteadyProducer(&asyncProducer{cl: cl, m: m}, topic, 2000)
}

// TestCompactionSurvivesKill9: a producer keeps writing versions of 1,000
// keys (some tombstones) into 64 KiB segments while the cleaner runs every
// 50ms with a 16 KiB offset map (614 keys: the dirty range takes several
// passes). The broker is killed with SIGKILL at random moments 20 times.
// After each restart no key live at the kill has lost its latest value
// (only a newer record of the same key may replace it), records hold what
// was acknowledged at their offsets and offsets increase; at the end, after
// a quiet period, the log is cleaned to exactly the latest value per live
// key: cleaning resumed.
func TestCompactionSurvivesKill9(t *testing.T) {
	testStart := time.Now()
	b := StartBroker(t, withArgs("--log-cleaner-backoff", "50ms", "--log-cleaner-dedupe-buffer-size", "16384"))
	const topic = "compact-kill9"
	createTopic(t, b.Admin(), topic, 1, map[string]string{
		"cleanup.policy": "compact", "remote.storage.enable": "false", "internal.segment.bytes": "65536",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
	})
	m := newKeyedLog(killGen)
	p := startKillProducer(b, topic, m)
	defer p.close()

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("kill schedule seed %d", seed)
	dir := b.PartitionDir(topic, 0)
	midPass := 0
	for kill := range 20 {
		p.resume()
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
		b.Kill()
		before := m.view() // every acknowledgement there will be came before the kill
		if left := cleanerLeftovers(t, dir); len(left) > 0 {
			midPass++
			t.Logf("kill %d: interrupted a cleaning pass (%s)", kill+1, strings.Join(left, " "))
		}
		b.Start()
		p.quiesce(t)
		now := m.view()
		checkHWIsAcked(t, b, topic, now)
		checkNoLoss(t, b, topic, before, now, now.end())
	}
	t.Logf("20 kills (%d during a pass), %d records produced, %d bytes of segments in %d files, %v",
		midPass, p.produced(), logBytesOnDisk(t, dir), len(segmentFiles(t, dir)), time.Since(testStart).Round(time.Millisecond))

	// Quiet period: roll the keyed data into sealed segments and let the
	// cleaner finish.
	filler := fillerSeq
	p.rollPast(t, b, topic, m.view().end()-1, &filler)
	took := m.view().waitConverged(t, b, topic, convergence{}, 60*time.Second)
	if n := cleanedSinceLastStart(b); n == 0 {
		t.Fatalf("no cleaning pass logged since the last restart")
	}
	// Nothing left to clean: the files of the passes the kills interrupted
	// were removed or completed by recovery, none linger.
	testkit.WaitFor(t, 10*time.Second, "no cleaner files left in "+dir, func() bool { return len(cleanerLeftovers(t, dir)) == 0 })
	t.Logf("cleaned to the latest value per live key %v after the last kill's check; %d bytes of segments in %d files; whole test %v",
		took.Round(time.Millisecond), logBytesOnDisk(t, dir), len(segmentFiles(t, dir)), time.Since(testStart).Round(time.Millisecond))
}

// checkHWIsAcked: with the producer quiet, the log ends where the
// acknowledgements end (no record was written twice or without an
// acknowledgement: idempotence across kill -9).
func checkHWIsAcked(t testing.TB, b *Broker, topic string, v *modelView) {
	t.Helper()
	if hw := endOffsets(t, b.Admin(), topic)[0]; hw != v.end() {
		t.Fatalf("high watermark %d, acknowledged up to offset %d", hw, v.end()-1)
	}
	for off, seq := range v.seqAt {
		if seq < 0 {
			t.Fatalf("offset %d below the high watermark was never acknowledged", off)
		}
	}
}
